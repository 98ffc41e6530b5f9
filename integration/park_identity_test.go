package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Parking in the world outside one group (docs/parking.md, "Identity"):
// two groups with parking on one topic, an operator's offset reset, a
// source topic deleted and made again. Each group handles every record of
// its own, once, in order, whatever the other group or an earlier time
// left in the park topic.

// okHandler handles every message.
func okHandler(member string, l *lanestest.Ledger) consumer.Handler {
	return l.Handler(member, consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }))
}

// parkThenRecover runs one member of group until the stuck session of g is
// parked with all its messages, then opens g and waits until l has every
// message and nothing is parked; the member is stopped.
func parkThenRecover(t *testing.T, c *cluster, group, topic, dlq string, g *stuckGate, l *lanestest.Ledger, total int) {
	t.Helper()
	m := startMember(t, "m1", c.parkConfig(group, topic, dlq, 1000, consumer.ParkHold), g.handler("m1", l))
	waitFor(t, "stuck session parked with all its messages", time.Minute, func() bool {
		s, _, r := parked(m.c)
		return s == 1 && r == parkPer
	})
	g.open.Store(true)
	waitFinished(t, l, total, 2*time.Minute)
	waitFor(t, "session unparked", time.Minute, func() bool { s, _, _ := parked(m.c); return s == 0 })
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestParkTwoGroups: group A parks a session and, its budget spent, holds
// it; group B, with parking on the same topic and the same park topic,
// starts then: it takes none of A's copies, markers or fences as its own
// (nothing parked, nothing held) and handles every message in order. A's
// session is released and handled too. InspectParked lists A's session
// for A alone.
func TestParkTwoGroups(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	la, lb := lanestest.NewLedger(), lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	stuck := sessions[7]
	g := &stuckGate{stuck: map[string]bool{stuck: true}}
	c.produce(t, topic, sessions, parkPer, la, lb)
	a := startMember(t, "a", c.parkConfig("park-two-a", topic, dlq, 2, consumer.ParkHold), g.handler("a", la))
	ctx, cancel := context.WithCancel(context.Background())
	dlqDone := make(chan error, 1)
	go func() { dlqDone <- lanestest.WatchDeadLetters(ctx, c.Broker, dlq, la) }()
	defer func() { cancel(); <-dlqDone }()
	var part int32 = -1
	waitFor(t, "A holds the stuck session", time.Minute, func() bool {
		for _, p := range a.c.Stats().Partitions {
			if p.Park.Held == 1 && p.Park.Records == parkPer-1 {
				part = p.Partition
			}
		}
		return part >= 0
	})

	b := startMember(t, "b", c.parkConfig("park-two-b", topic, dlq, 2, consumer.ParkHold), okHandler("b", lb))
	waitFinished(t, lb, parkSessions*parkPer, 2*time.Minute)
	if s, h, r := parked(b.c); s != 0 || h != 0 || r != 0 {
		t.Fatalf("group B shows %d parked sessions (%d held, %d records): it took group A's park entries as its own", s, h, r)
	}
	ictx, icancel := context.WithTimeout(context.Background(), time.Minute)
	defer icancel()
	for group, want := range map[string]int{groupName("park-two-a"): 1, groupName("park-two-b"): 0, "no-such-group": 0} {
		got, err := consumer.InspectParked(ictx, consumer.ParkTarget{Brokers: c.brokers, Group: group, Topic: topic, ClientOptions: c.Opts()})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want || (want == 1 && (got[0].Session != stuck || !got[0].Held)) {
			t.Fatalf("InspectParked for group %s: %+v; want %d session(s)", group, got, want)
		}
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	rb := lb.Report()
	assertClean(t, c, rb, 0, false)
	if rb.Duplicates != 0 || rb.DeadLettered != 0 {
		t.Fatalf("group B: %s; want every message once, none dead-lettered", rb)
	}

	g.open.Store(true)
	if !a.c.ReleaseParked(topic, part, stuck) {
		t.Fatalf("ReleaseParked(%s, %d, %s) = false for A's held session", topic, part, stuck)
	}
	waitFinished(t, la, parkSessions*parkPer, 2*time.Minute)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	ra := la.Report()
	assertClean(t, c, ra, 0, false)
	if ra.DeadLettered != 1 {
		t.Fatalf("group A: %d dead-lettered; want the one head that spent its budget", ra.DeadLettered)
	}
}

// TestParkOffsetReset: a session is parked and recovers; the group stops
// and an operator resets its offsets to the start with empty metadata (as
// kafka-consumer-groups --reset-offsets --to-earliest does). Started
// again, the group handles every message again, the once-parked session's
// too, in order: the park topic's old floors are not this time's.
func TestParkOffsetReset(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	first, again := lanestest.NewLedger(), lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	g := &stuckGate{stuck: map[string]bool{sessions[7]: true}}
	c.produce(t, topic, sessions, parkPer, first, again)
	group := "park-reset"
	parkThenRecover(t, c, group, topic, dlq, g, first, parkSessions*parkPer)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.client(t)
	defer cl.Close()
	var to kadm.Offsets
	for p := range int32(parkPartitions) {
		to.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resps, err := kadm.NewClient(cl).CommitOffsets(ctx, groupName(group), to)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("reset the group's offsets: %v", err)
	}

	m := startMember(t, "m2", c.parkConfig(group, topic, dlq, 1000, consumer.ParkHold), okHandler("m2", again))
	waitFinished(t, again, parkSessions*parkPer, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	r := again.Report()
	assertClean(t, c, r, 0, false)
	if r.Duplicates != 0 {
		t.Fatalf("%s; want every message once after the reset", r)
	}
}

// TestParkRecreatedTopic: a session is parked and recovers; the group
// stops, the source topic is deleted and made again (its records start
// at offset 0 again; Kafka drops the group's commits with it) and the same
// sessions send again. The group handles every new message in order: the
// park topic's floors of the old topic are not the new one's.
func TestParkRecreatedTopic(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	old, fresh := lanestest.NewLedger(), lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	g := &stuckGate{stuck: map[string]bool{sessions[7]: true}}
	c.produce(t, topic, sessions, parkPer, old)
	group := "park-recreated"
	parkThenRecover(t, c, group, topic, dlq, g, old, parkSessions*parkPer)

	c.recreateTopic(t, topic, parkPartitions)
	c.produce(t, topic, sessions, parkPer, fresh)
	m := startMember(t, "m2", c.parkConfig(group, topic, dlq, 1000, consumer.ParkHold), okHandler("m2", fresh))
	waitFinished(t, fresh, parkSessions*parkPer, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	r := fresh.Report()
	assertClean(t, c, r, 0, false)
	if r.Duplicates != 0 {
		t.Fatalf("%s; want every message of the new topic once", r)
	}
}

// recreateTopic deletes topic and makes it again with partitions, trying
// the creation again while the broker still finishes the deletion.
func (c *cluster) recreateTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	for {
		r, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err == nil {
			return
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || !sleepCtx(ctx, 100*time.Millisecond) {
			t.Fatalf("make %s again: %v", topic, err)
		}
	}
}

// sleepCtx waits d (between tries of an operation the broker finishes in
// its own time), or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
