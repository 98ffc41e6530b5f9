package integration

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// kafkaMaxMessageBytes is Kafka's default max.message.bytes (1 MiB + 12),
// which the topics here keep.
const kafkaMaxMessageBytes = 1_048_588

// TestParkLargeRecords: two stuck sessions whose first message is near
// the topics' 1 MiB limit, one of 1,040,000 bytes (its park copy fits:
// parked whole) and one so close to the limit that its copy's headers
// cannot fit (parked as a stub, retried from the source partition); the
// other sessions flow while both are parked; then both recover, every
// message once, in order, with its full value.
func TestParkLargeRecords(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(20)
	whole, stub := sessions[3], sessions[11]
	sizes := map[string]int{whole: 1_040_000, stub: kafkaMaxMessageBytes - 400}
	p, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, DeliveryTimeout: 2 * time.Minute,
		MaxMessageBytes: kafkaMaxMessageBytes - 300, ClientOptions: c.Opts()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := func(s string, seq int) []byte {
		v := []byte(s + "|" + strconv.Itoa(seq) + "|")
		if n := sizes[s]; n > 0 && seq == 0 {
			v = append(v, bytes.Repeat([]byte{'x'}, n-len(v))...)
		}
		return v
	}
	for seq := range parkPer {
		for _, s := range sessions {
			if err := l.Send(ctx, p, s, seq, value(s, seq)); err != nil {
				p.Close()
				t.Fatalf("send %s #%d (%d bytes): %v", s, seq, len(value(s, seq)), err)
			}
		}
	}
	p.Close()

	g := &stuckGate{stuck: map[string]bool{whole: true, stub: true}}
	full := 0 // messages handled with a value other than their own
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		s, rest, _ := bytes.Cut(m.Record.Value, []byte("|"))
		seq, _, _ := bytes.Cut(rest, []byte("|"))
		n, _ := strconv.Atoi(string(seq))
		if !bytes.Equal(m.Record.Value, value(string(s), n)) {
			full++ // one lane per session: calls of one session never overlap
		}
		return g.handler("m1", l).Handle(ctx, m)
	})
	m := startMember(t, "m1", c.parkConfig("park-large", topic, dlq, 1000, consumer.ParkHold), h)
	rest := (len(sessions) - 2) * parkPer
	waitFinished(t, l, rest, 2*time.Minute)
	waitFor(t, "both large sessions parked with all their messages", time.Minute, func() bool {
		s, _, r := parked(m.c)
		return s == 2 && r == 2*parkPer
	})
	for _, ps := range m.c.Stats().Partitions {
		if ps.Park.WriteError != "" {
			t.Fatalf("%s/%d: park writes failing: %s", ps.Topic, ps.Partition, ps.Park.WriteError)
		}
	}
	g.open.Store(true)
	waitFinished(t, l, len(sessions)*parkPer, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	assertClean(t, c, r, 0, false)
	if r.Duplicates != 0 || full != 0 {
		t.Fatalf("%s; %d messages handled with another value than their own; want none, every message once", r, full)
	}
}
