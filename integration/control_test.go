package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Per-session control (#30) on the cluster the suite runs on: a pause
// that holds across a rebalance and a restart, a session's rate, a
// resource's concurrency under MaxConcurrency, and an unordered topic.

// controlConfig turns per-session control on, with a control topic of the
// test's own.
func (c *cluster) controlConfig(group, topic, dlq string) consumer.Config {
	cfg := c.consumerConfig(group, topic, dlq)
	cfg.Control = consumer.ControlPolicy{Enabled: true, Topic: topic + "-control", Interval: 100 * time.Millisecond}
	return cfg
}

// control is cfg's control target, for an operator's commands.
func (c *cluster) control(cfg consumer.Config) consumer.ControlTarget {
	return consumer.ControlTarget{Brokers: c.brokers, Group: cfg.Group, Topic: cfg.Control.Topic, By: "integration", ClientOptions: c.Opts()}
}

// callsOf counts the ledger's calls of session.
func callsOf(l *lanestest.Ledger, session string) int {
	n := 0
	for _, call := range l.Calls() {
		if call.Session == session {
			n++
		}
	}
	return n
}

// TestPausedSessionRebalanceRestart: two of 40 sessions are paused by an
// operator before the group starts. One member handles every other
// session; a second joins (a rebalance) and more messages come; the first
// leaves and a third takes its partitions (a restart). The paused
// sessions are never handled meanwhile, by any member. Resumed, every
// message is handled: each session in order, nothing lost.
func TestPausedSessionRebalanceRestart(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 4)
	l := lanestest.NewLedger()
	sessions := sessionNames(40)
	paused := []string{sessions[3], sessions[17]}
	cfg := c.controlConfig("control-pause", topic, dlq)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, s := range paused {
		if _, err := consumer.PauseSession(ctx, c.control(cfg), topic, s, "moderation"); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	c.produce(t, topic, sessions, 20, l)
	others := func(per int) int { return (len(sessions) - len(paused)) * per }
	noPaused := func(when string) {
		t.Helper()
		for _, s := range paused {
			if n := callsOf(l, s); n != 0 {
				t.Fatalf("%s: paused session %s handled %d times", when, s, n)
			}
		}
	}
	m1 := startMember(t, "m1", cfg, l.Handler("m1", faulty(faults{work: time.Millisecond})))
	waitFinished(t, l, others(20), 2*time.Minute)
	assertGroupProtocol(t, c, cfg.Group)
	noPaused("one member")
	m2 := startMember(t, "m2", cfg, l.Handler("m2", faulty(faults{work: time.Millisecond})))
	c.produceRange(t, topic, sessions, 20, 30, l)
	waitFinished(t, l, others(30), 2*time.Minute)
	noPaused("after a rebalance")
	if err := m1.stop(); err != nil {
		t.Fatalf("m1: %v", err)
	}
	m3 := startMember(t, "m3", cfg, l.Handler("m3", faulty(faults{work: time.Millisecond})))
	c.produceRange(t, topic, sessions, 30, 40, l)
	waitFinished(t, l, others(40), 2*time.Minute)
	noPaused("after a restart")
	// Each paused session waits in one lane, on the member that owns its
	// partition now (a lane of a partition handed over drops out).
	for waiting, until := -1, time.Now().Add(time.Minute); waiting != len(paused); {
		waiting = 0
		for _, m := range []*member{m2, m3} {
			waiting += m.c.Stats().Control.LanesPaused
		}
		if time.Now().After(until) {
			t.Fatalf("%d paused lanes wait on the members; want one per paused session, %d", waiting, len(paused))
		}
		time.Sleep(10 * time.Millisecond) // polling Stats: it has no signal
	}
	for _, s := range paused {
		if _, err := consumer.ResumeSession(ctx, c.control(cfg), topic, s); err != nil {
			t.Fatal(err)
		}
	}
	waitFinished(t, l, len(sessions)*40, 2*time.Minute)
	for _, m := range []*member{m2, m3} {
		if err := m.stop(); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// TestThrottledSessionRate: one of 20 sessions is limited to 4 records a
// second (bursts of 1) by an operator. Its calls, by the ledger's
// timestamps, never run faster (one call of slack for the time between
// the gate and the handler), and the 19 others are all handled while it
// still has records waiting: its partition keeps flowing.
func TestThrottledSessionRate(t *testing.T) {
	const rate, per = 4.0, 30
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	l := lanestest.NewLedger()
	sessions := sessionNames(20)
	slow := sessions[5]
	cfg := c.controlConfig("control-rate", topic, dlq)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := consumer.LimitSession(ctx, c.control(cfg), topic, slow, consumer.Limit{Rate: rate, Burst: 1}, "spam"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.produce(t, topic, sessions, per, l)
	m := startMember(t, "m1", cfg, l.Handler("m1", faulty(faults{})))
	waitFinished(t, l, (len(sessions)-1)*per, 2*time.Minute)
	if n := callsOf(l, slow); n >= per {
		t.Fatalf("the limited session finished (%d calls) with the others: at %v/s it takes %v s", n, rate, per/rate)
	}
	waitFinished(t, l, len(sessions)*per, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	var ats []time.Time
	for _, call := range l.Calls() {
		if call.Session == slow {
			ats = append(ats, call.Start)
		}
	}
	slices.SortFunc(ats, func(a, b time.Time) int { return a.Compare(b) })
	for i := range ats {
		for j := i + 2; j < len(ats); j++ { // burst 1, one call of slack
			if least := time.Duration(float64(j-i-1) / rate * float64(time.Second)); ats[j].Sub(ats[i]) < least {
				t.Fatalf("calls %d to %d of %s ran in %v; at %v/s they take at least %v", i, j, slow, ats[j].Sub(ats[i]), rate, least)
			}
		}
	}
	t.Logf("%s: %d calls over %v at a limit of %v/s", slow, len(ats), ats[len(ats)-1].Sub(ats[0]).Round(time.Millisecond), rate)
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// TestResourceLimitUnderCap: records map to three tenants; tenant t0 may
// run 2 at once, and MaxConcurrency caps the member at 6. Counters in the
// handler never see more, every session is in order, nothing is lost.
func TestResourceLimitUnderCap(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 4)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	tenant := func(session string) string {
		var n int
		fmt.Sscanf(strings.TrimPrefix(session, "chat-"), "%d", &n)
		return fmt.Sprintf("t%d", n%3)
	}
	cfg := c.consumerConfig("control-resource", topic, dlq)
	cfg.MaxConcurrency = 6
	cfg.Throttle = consumer.ThrottlePolicy{
		Resource: func(r *kgo.Record) string { return tenant(string(r.Key)) },
		Limits:   map[string]consumer.Limit{"t0": {Concurrency: 2}},
	}
	var mu sync.Mutex
	running := map[string]int{}
	most := map[string]int{}
	all, mostAll := 0, 0
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		tn := tenant(m.SessionID)
		mu.Lock()
		running[tn]++
		all++
		most[tn], mostAll = max(most[tn], running[tn]), max(mostAll, all)
		mu.Unlock()
		time.Sleep(time.Millisecond) // the tenant's database call
		mu.Lock()
		running[tn]--
		all--
		mu.Unlock()
		return nil
	})
	start := time.Now()
	c.produce(t, topic, sessions, 10, l)
	m := startMember(t, "m1", cfg, l.Handler("m1", h))
	waitFinished(t, l, len(sessions)*10, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("most at once: %d across the member, by tenant %v", mostAll, most)
	if most["t0"] > 2 || mostAll > 6 {
		t.Fatalf("tenant t0 ran %d at once (limit 2), the member %d (MaxConcurrency 6)", most["t0"], mostAll)
	}
	if most["t1"] < 2 && most["t2"] < 2 {
		t.Fatalf("tenants t1 and t2 never ran two at once (%v): the run proves nothing about the limit being per tenant", most)
	}
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// TestUnorderedTopic: a topic consumed with OrderNone runs a session's
// records at once, in any order. Every record is handled exactly once
// (no rebalance), and while the record at a partition's lowest offset is
// held in its handler, the group's committed offset of that partition
// never passes it, however many records above it are done.
func TestUnorderedTopic(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	l := lanestest.NewLedger()
	sessions := sessionNames(5)
	cfg := c.consumerConfig("control-unordered", topic, dlq)
	cfg.Order = map[string]consumer.Order{topic: consumer.OrderNone}
	release := make(chan struct{})
	var heldOnce sync.Once
	held := make(chan *kgo.Record, 1)
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if m.Record.Offset == 0 && m.Record.Partition == 0 {
			heldOnce.Do(func() { held <- m.Record })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	start := time.Now()
	c.produce(t, topic, sessions, 40, l)
	m := startMember(t, "m1", cfg, l.Handler("m1", h))
	r := <-held
	waitFinished(t, l, len(sessions)*40-1, 2*time.Minute)
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	looks := 0
	// Five commit intervals with every record above it done: the commits
	// checked are the member's, made meanwhile; a look every 20 ms.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(5 * cfg.CommitInterval); time.Now().Before(end); <-tick.C {
		offs, err := adm.FetchOffsets(ctx, cfg.Group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(topic, r.Partition); ok && o.At > r.Offset {
			t.Fatalf("committed %d on %s/%d while offset %d is still in its handler", o.At, topic, r.Partition, r.Offset)
		}
		looks++
	}
	t.Logf("%d looks at the committed offsets over 5 commit intervals, none past the record in its handler", looks)
	close(release)
	waitFinished(t, l, len(sessions)*40, time.Minute)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	rep := l.Report()
	t.Logf("%s [%s, %v]", rep, c.name(), time.Since(start).Round(time.Millisecond))
	if rep.Lost != 0 || rep.Duplicates != 0 || rep.Calls != len(sessions)*40 {
		t.Fatalf("unordered topic: %d lost, %d duplicates, %d calls of %d messages; want each once", rep.Lost, rep.Duplicates, rep.Calls, len(sessions)*40)
	}
}
