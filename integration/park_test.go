package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// Parking scenarios (docs/parking.md): a few sessions fail for a while
// (until their gate opens) while the rest flow; every message is checked
// by the ledger for order, overlaps and loss.

const (
	parkSessions   = 100
	parkPer        = 20
	parkPartitions = 4
)

// parkTopics creates the source topic, its DLQ and its park topic (same
// partition count).
func (c *cluster) parkTopics(t *testing.T) (topic, dlq string) {
	t.Helper()
	topic, dlq = c.topics(t, parkPartitions)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, parkPartitions, topic+consumer.DefaultParkTopicSuffix); err != nil {
		t.Fatal(err)
	}
	return topic, dlq
}

// parkConfig parks after 3 failed attempts and retries a parked session
// every 100-400 ms; MaxBufferedRecords is small, so a session stuck in its
// lane would pause its partition within a few records.
func (c *cluster) parkConfig(group, topic, dlq string, budget int, on consumer.ParkExhausted) consumer.Config {
	cfg := c.consumerConfig(group, topic, dlq)
	cfg.MaxBufferedRecords = 32
	cfg.Retry.Forever = true
	cfg.Park = consumer.ParkPolicy{Enabled: true, AfterAttempts: 3, Delay: 100 * time.Millisecond,
		MaxDelay: 400 * time.Millisecond, MaxAttempts: budget, OnExhausted: on}
	return cfg
}

// stuckGate makes the sessions of stuck fail until open is called.
type stuckGate struct {
	stuck map[string]bool
	open  atomic.Bool
}

var errStuck = errors.New("injected outage of one session's dependency")

func (g *stuckGate) handler(member string, l *lanestest.Ledger) consumer.Handler {
	return l.Handler(member, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		session, _, _ := strings.Cut(string(m.Record.Value), "|")
		if g.stuck[session] && !g.open.Load() {
			return errStuck
		}
		return nil
	}))
}

// parked sums the parked sessions, held ones and records over c's
// partitions.
func parked(c *consumer.Consumer) (sessions, held, records int) {
	for _, p := range c.Stats().Partitions {
		sessions += p.Park.Sessions
		held += p.Park.Held
		records += p.Park.Records
	}
	return sessions, held, records
}

// waitFor polls cond (a consumer's Stats) until it holds or limit passes.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond) // polling Stats, which has no change signal
	}
}

// TestParkStuckSessions: 1 % of the sessions fail while every other
// message is handled (the partitions keep flowing: with in-lane retries
// they would pause at MaxBufferedRecords); then the stuck sessions'
// dependency comes back and their messages are handled from the park
// topic, each session in order.
func TestParkStuckSessions(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	g := &stuckGate{stuck: map[string]bool{sessions[7]: true}}
	c.produce(t, topic, sessions, parkPer, l)
	m := startMember(t, "m1", c.parkConfig("park-stuck", topic, dlq, 1000, consumer.ParkHold), g.handler("m1", l))
	rest := (parkSessions - len(g.stuck)) * parkPer
	waitFinished(t, l, rest, 2*time.Minute) // while the stuck session still fails
	assertGroupProtocol(t, c, groupName("park-stuck"))
	waitFor(t, "stuck session parked with all its messages", time.Minute, func() bool {
		s, _, r := parked(m.c)
		return s == len(g.stuck) && r == len(g.stuck)*parkPer
	})
	if n := l.Accounted(); n != rest {
		t.Fatalf("%d messages accounted while the stuck session fails; want %d", n, rest)
	}
	g.open.Store(true)
	waitFinished(t, l, parkSessions*parkPer, 2*time.Minute)
	waitFor(t, "session unparked", time.Minute, func() bool { s, _, _ := parked(m.c); return s == 0 })
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	assertClean(t, c, r, 0, false)
	if r.Duplicates != 0 {
		t.Fatalf("%d duplicates without a crash", r.Duplicates)
	}
}

// TestParkRestart: a member stops while sessions are parked; a new
// instance of the same group rebuilds the parked set from the park topic
// and the commit, and every session is handled in order.
func TestParkRestart(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	g := &stuckGate{stuck: map[string]bool{sessions[3]: true, sessions[50]: true}}
	c.produce(t, topic, sessions, parkPer, l)
	cfg := c.parkConfig("park-restart", topic, dlq, 1000, consumer.ParkHold)
	m1 := startMember(t, "m1", cfg, g.handler("m1", l))
	rest := (parkSessions - len(g.stuck)) * parkPer
	waitFinished(t, l, rest, 2*time.Minute)
	waitFor(t, "stuck sessions parked", time.Minute, func() bool {
		s, _, r := parked(m1.c)
		return s == len(g.stuck) && r == len(g.stuck)*parkPer
	})
	if err := m1.stop(); err != nil {
		t.Fatal(err)
	}
	m2 := startMember(t, "m2", cfg, g.handler("m2", l))
	waitFor(t, "parked sessions rebuilt by the new instance", time.Minute, func() bool {
		s, _, r := parked(m2.c)
		return s == len(g.stuck) && r == len(g.stuck)*parkPer
	})
	g.open.Store(true)
	waitFinished(t, l, parkSessions*parkPer, 2*time.Minute)
	if err := m2.stop(); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, l.Report(), 0, false)
}

// TestParkBudgetSpent: a session that never recovers spends its park
// retries: its head is dead-lettered (reason park-exhausted), then with
// ParkHold the rest stays parked, held; with ParkRelease each of its
// messages is dead-lettered in turn and the session ends unparked.
func TestParkBudgetSpent(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   consumer.ParkExhausted
	}{{"hold", consumer.ParkHold}, {"release", consumer.ParkRelease}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			topic, dlq := c.parkTopics(t)
			l := lanestest.NewLedger()
			sessions := sessionNames(parkSessions)
			g := &stuckGate{stuck: map[string]bool{sessions[11]: true}}
			c.produce(t, topic, sessions, parkPer, l)
			m := startMember(t, "m1", c.parkConfig("park-budget-"+tc.name, topic, dlq, 2, tc.on), g.handler("m1", l))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dlqDone := make(chan error, 1)
			go func() { dlqDone <- lanestest.WatchDeadLetters(ctx, c.Broker, dlq, l) }()
			defer func() { cancel(); <-dlqDone }()
			rest := (parkSessions - 1) * parkPer
			if tc.on == consumer.ParkHold {
				waitFinished(t, l, rest+1, 2*time.Minute) // the rest, and the stuck head dead-lettered
				waitFor(t, "stuck session held", time.Minute, func() bool {
					s, h, r := parked(m.c)
					return s == 1 && h == 1 && r == parkPer-1
				})
				if m.c.ReleaseParked(topic, 0, "no-such-session") {
					t.Fatal("ReleaseParked released a session that is not parked")
				}
			} else {
				waitFinished(t, l, parkSessions*parkPer, 2*time.Minute) // every stuck message dead-lettered in turn
				waitFor(t, "stuck session released", time.Minute, func() bool { s, _, _ := parked(m.c); return s == 0 })
			}
			if err := m.stop(); err != nil {
				t.Fatal(err)
			}
			r := l.Report()
			want := 1
			if tc.on == consumer.ParkRelease {
				want = parkPer
			}
			if r.DeadLettered != want {
				t.Fatalf("%d dead-lettered; want %d", r.DeadLettered, want)
			}
			if st := m.c.Stats(); st.DeadLetteredByReason[consumer.ReasonParkExhausted] != int64(want) {
				t.Fatalf("dead-lettered by reason %v; want %d %s", st.DeadLetteredByReason, want, consumer.ReasonParkExhausted)
			}
			if tc.on == consumer.ParkHold && (r.Lost != parkPer-1 || r.Violations != 0 || r.Overlaps != 0) {
				t.Fatalf("%s; want exactly the held session's %d later messages unaccounted (parked)", r, parkPer-1)
			}
			if tc.on == consumer.ParkRelease {
				assertClean(t, c, r, 0, false)
			}
		})
	}
}

// TestParkHoldThenRelease: a session held after its budget was spent stays
// parked, its later messages unhandled, until an operator releases it once
// its dependency is back, on the member (ReleaseParked) or from anywhere
// (ReleaseHeld, as lanes park release does: a marker the owner picks up);
// then they run in order.
func TestParkHoldThenRelease(t *testing.T) {
	for _, byMarker := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "marker"}[byMarker], func(t *testing.T) {
			testParkHoldThenRelease(t, byMarker)
		})
	}
}

func testParkHoldThenRelease(t *testing.T, byMarker bool) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	stuck := sessions[11]
	g := &stuckGate{stuck: map[string]bool{stuck: true}}
	c.produce(t, topic, sessions, parkPer, l)
	group := "park-hold-release"
	if byMarker {
		group += "-marker"
	}
	m := startMember(t, "m1", c.parkConfig(group, topic, dlq, 2, consumer.ParkHold), g.handler("m1", l))
	ctx, cancel := context.WithCancel(context.Background())
	dlqDone := make(chan error, 1)
	go func() { dlqDone <- lanestest.WatchDeadLetters(ctx, c.Broker, dlq, l) }()
	defer func() { cancel(); <-dlqDone }()
	waitFinished(t, l, (parkSessions-1)*parkPer+1, 2*time.Minute)
	var part int32 = -1
	waitFor(t, "stuck session held", time.Minute, func() bool {
		for _, p := range m.c.Stats().Partitions {
			if p.Park.Held == 1 {
				part = p.Partition
			}
		}
		return part >= 0
	})
	g.open.Store(true)
	if byMarker {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		var held []consumer.ParkedSession
		var err error
		waitFor(t, "the hold in a commit's park position", time.Minute, func() bool { // ReleaseHeld finds what the group committed
			held, err = consumer.ReleaseHeld(rctx, consumer.ParkTarget{Brokers: c.brokers, Group: groupName(group), Topic: topic, ClientOptions: c.Opts()}, stuck)
			return !errors.Is(err, consumer.ErrNotHeld)
		})
		if err != nil || len(held) != 1 || held[0].Partition != part || len(held[0].Offsets) != parkPer-1 {
			t.Fatalf("ReleaseHeld(%s): %+v, %v; want the session held on partition %d with %d records", stuck, held, err, part, parkPer-1)
		}
	} else if !m.c.ReleaseParked(topic, part, stuck) {
		t.Fatalf("ReleaseParked(%s, %d, %s) = false for a held session", topic, part, stuck)
	}
	waitFinished(t, l, parkSessions*parkPer, 2*time.Minute)
	waitFor(t, "session unparked", time.Minute, func() bool { s, _, _ := parked(m.c); return s == 0 })
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	assertClean(t, c, r, 0, false)
	if r.DeadLettered != 1 {
		t.Fatalf("%d dead-lettered; want the one head that spent its budget", r.DeadLettered)
	}
}

// TestParkRollingDeploy: three members are replaced one by one while two
// sessions are parked and being retried (and failing): each revoke commits
// the park position with the watermark, each new owner rebuilds the parked
// sessions of the partitions it gains. Then the stuck sessions recover:
// every message once at least, in order, none lost, and without a crash
// no session runs out of order or on two members at once.
func TestParkRollingDeploy(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(parkSessions)
	g := &stuckGate{stuck: map[string]bool{sessions[9]: true, sessions[61]: true}}
	c.produce(t, topic, sessions, parkPer, l)
	cfg := c.parkConfig("park-rolling", topic, dlq, 100000, consumer.ParkHold)
	var members []*member
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("old%d", i)
		members = append(members, startMember(t, name, cfg, g.handler(name, l)))
	}
	total := parkSessions * parkPer
	rest := total - len(g.stuck)*parkPer
	waitFinished(t, l, rest, 2*time.Minute)
	parkedAll := func(ms []*member) func() bool {
		return func() bool {
			s, r := 0, 0
			for _, m := range ms {
				ps, _, pr := parked(m.c)
				s, r = s+ps, r+pr
			}
			return s == len(g.stuck) && r == len(g.stuck)*parkPer
		}
	}
	waitFor(t, "stuck sessions parked", time.Minute, parkedAll(members))
	var fresh []*member
	for i, old := range members {
		stopped := make(chan error, 1)
		go func() { stopped <- old.stop() }() // the old member drains ...
		name := fmt.Sprintf("new%d", i+1)
		fresh = append(fresh, startMember(t, name, cfg, g.handler(name, l))) // ... while its replacement joins
		if err := <-stopped; err != nil {
			t.Errorf("%s: Run: %v", old.name, err)
		}
	}
	waitFor(t, "parked sessions rebuilt by the new members", time.Minute, parkedAll(fresh))
	if n := l.Accounted(); n != rest {
		t.Fatalf("%d accounted while the stuck sessions fail; want %d", n, rest)
	}
	g.open.Store(true)
	waitFinished(t, l, total, 2*time.Minute)
	for _, m := range fresh {
		if err := m.stop(); err != nil {
			t.Errorf("%s: Run: %v", m.name, err)
		}
	}
	assertClean(t, c, l.Report(), 0, false)
}
