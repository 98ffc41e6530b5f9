package main

import (
	"bytes"
	"context"
	"github.com/lanesdev/lanes/lanestest"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDLQInspectAndReplay: dead-lettered records are listed with their
// reasons, and replayed to their source topic with the same key and event
// ID, without the lanes-dlq-* headers, on the session's partition.
func TestDLQInspectAndReplay(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "chat", "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dead := func(session, reason string, seq uint64) *kgo.Record {
		r := &kgo.Record{Topic: "chat-dlq", Key: []byte(session), Value: []byte(session + " says hi")}
		eventid.Stamp(r, eventid.ForSequence(session, seq), session)
		r.Headers = append(r.Headers,
			kgo.RecordHeader{Key: consumer.HeaderDLQTopic, Value: []byte("chat")},
			kgo.RecordHeader{Key: consumer.HeaderDLQPartition, Value: []byte("1")},
			kgo.RecordHeader{Key: consumer.HeaderDLQOffset, Value: []byte("42")},
			kgo.RecordHeader{Key: consumer.HeaderDLQReason, Value: []byte(reason)},
			kgo.RecordHeader{Key: consumer.HeaderDLQAttempts, Value: []byte("3")},
			kgo.RecordHeader{Key: consumer.HeaderDLQError, Value: []byte("boom")})
		return r
	}
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, dead("chat-1", "permanent", 1), dead("chat-2", "retries-exhausted", 7),
		dead("chat-3", "permanent", 2)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := run(ctx, []string{"dlq", "inspect", "--brokers", brokers, "--topic", "chat-dlq"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "3 records; permanent: 2; retries-exhausted: 1") ||
		!strings.Contains(out.String(), "from=chat/1@42") {
		t.Fatalf("inspect output:\n%s", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"dlq", "replay", "--brokers", brokers, "--topic", "chat-dlq", "--reason", "permanent"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 records replayed") {
		t.Fatalf("replay output: %s", out.String())
	}
	got, err := readAll(ctx, lanestest.ConnectBroker(c.ListenAddrs()), "chat")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d records in chat, want 2", len(got))
	}
	for _, r := range got {
		s := string(r.Key)
		if want, _ := hashring.KafkaPartition(r.Key, 4); int(r.Partition) != want {
			t.Errorf("%s replayed to partition %d, want %d", s, r.Partition, want)
		}
		if eventid.FromRecord(r) != eventid.ForSequence(s, map[string]uint64{"chat-1": 1, "chat-3": 2}[s]) {
			t.Errorf("%s: event ID changed on replay", s)
		}
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "lanes-dlq-") {
				t.Errorf("%s: replayed with header %s", s, h.Key)
			}
		}
	}
	if err := run(ctx, []string{"dlq", "replay", "--topic", "x"}, &out, &out); err == nil {
		t.Error("replay without --brokers succeeded")
	}
}
