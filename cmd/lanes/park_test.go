package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParkInspect: a session parked in the park topic (a copy written as
// lanes writes it, no done marker) is listed with its source offsets; a
// session released by a done marker is not.
func TestParkInspect(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "chat", "chat.park"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	entry := func(kind, session string, extra ...kgo.RecordHeader) *kgo.Record {
		h := append([]kgo.RecordHeader{{Key: consumer.HeaderParkKind, Value: []byte(kind)},
			{Key: consumer.HeaderParkSession, Value: []byte(session)}, {Key: consumer.HeaderParkEpoch, Value: []byte("-1")}}, extra...)
		return &kgo.Record{Topic: "chat.park", Partition: 1, Key: []byte(session), Headers: h}
	}
	copyOf := func(session, offset string) *kgo.Record {
		return entry("record", session, kgo.RecordHeader{Key: consumer.HeaderParkTopic, Value: []byte("chat")},
			kgo.RecordHeader{Key: consumer.HeaderParkPartition, Value: []byte("1")},
			kgo.RecordHeader{Key: consumer.HeaderParkOffset, Value: []byte(offset)})
	}
	if err := cl.ProduceSync(context.Background(),
		copyOf("alice", "3"), copyOf("bob", "4"), copyOf("alice", "9"),
		entry("done", "bob", kgo.RecordHeader{Key: consumer.HeaderParkThrough, Value: []byte("4")}),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"park", "inspect", "--brokers", strings.Join(c.ListenAddrs(), ","),
		"--group", "g", "--topic", "chat"}, &out, &errOut)
	if err != nil {
		t.Fatalf("park inspect: %v\n%s", err, errOut.String())
	}
	got := out.String()
	if !strings.Contains(got, `chat/1	session "alice"	waiting	2 records	offsets [3 9]`) || strings.Contains(got, "bob") ||
		!strings.Contains(got, "1 sessions parked, 2 records") {
		t.Fatalf("park inspect printed:\n%s", got)
	}
}
