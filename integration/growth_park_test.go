package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// A moved session that is parked at the time (#34): a session parked on
// its old partition (its handler kept failing) when the topic grows has its
// next records, placed on a new partition, parked behind the parked ones
// (Stats.MovedParked) and retried only once those are done.

// TestGrowthParkedSession: 30 sessions with a backlog on a topic of 2
// partitions (its park topic of 2), two members with parking on; 4 of the
// sessions fail (their gate is closed) and are parked with their backlog,
// 3 of them moved by the growth. The park topic then the topic grow to 8
// and the lanes producer sends 30 more messages of every session, most
// placed with the new count. While the stuck sessions still fail, every
// other message is handled, every stuck one is parked (the moved ones on
// their new partitions, behind their records on the old), and no call of a
// stuck session ever ran a newer record than its oldest unhandled one; the
// parked heads keep being retried (and failing) meanwhile. Then the gate
// opens: every session in order, no overlap, nothing lost. Kafka's
// partitioner.
func TestGrowthParkedSession(t *testing.T) {
	const backlog, after, grown = 20, 30, 8
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, 2, topic+consumer.DefaultParkTopicSuffix); err != nil {
		t.Fatal(err)
	}
	l := lanestest.NewLedger()
	sessions := sessionNames(30)
	stuck := stuckAcross(t, sessions, 2, grown)
	g := &stuckGate{stuck: map[string]bool{}}
	for _, s := range stuck {
		g.stuck[s] = true
	}
	start := time.Now()
	cfg := c.growthConfig("growth-parked", topic, dlq)
	cfg.Park = consumer.ParkPolicy{Enabled: true, AfterAttempts: 3, Delay: 50 * time.Millisecond,
		MaxDelay: 200 * time.Millisecond, MaxAttempts: 1_000_000, OnExhausted: consumer.ParkHold} // retried until the gate opens
	o := &orderWatch{next: map[string]int{}, failed: map[string]int{}}
	w := newGrowthWatch(t)
	for _, name := range []string{"m1", "m2"} {
		w.startWith(name, cfg, l.Handler(name, o.wrap(g.work())))
	}
	w.owners(2, time.Minute) // each member owns an old partition before the backlog
	assertGroupProtocol(t, c, cfg.Group)
	gp := newGrowthProducer(t, c, topic, producer.PartitionKafka, sessions, l)
	gp.send(backlog)
	o.waitFor(t, "the stuck sessions parked with their backlog", time.Minute, func() bool {
		_, rs := w.parked()
		return rs == len(stuck)*backlog
	})
	c.grow(t, topic+consumer.DefaultParkTopicSuffix, grown) // the park topic first (docs/operations.md)
	c.grow(t, topic, grown)
	cr := gp.sendAcross(2, after)
	sent := time.Now()
	rest := (len(sessions) - len(stuck)) * gp.next
	waitFinished(t, l, rest, 3*time.Minute)
	moved := gp.movedOf(stuck)
	if len(moved) == 0 {
		t.Fatalf("no stuck session's messages went to two partitions (%v): the run proves nothing", stuck)
	}
	o.waitFor(t, "every stuck message parked, the moved ones behind their old partitions", 2*time.Minute, func() bool {
		_, rs := w.parked()
		return rs == len(stuck)*gp.next && w.movedParked() >= int64(len(moved))
	})
	ss, rs := w.parked()
	t.Logf("stuck sessions %v, moved %v: all %d of their messages parked %v after the last was sent (%d parked sessions over the partitions), MovedParked %d",
		stuck, moved, rs, time.Since(sent).Round(time.Millisecond), ss, w.movedParked())
	failed := o.failures(stuck)
	o.waitFor(t, "five more failed retries of every stuck session", time.Minute, func() bool { // the moved heads are due meanwhile too
		now := o.failures(stuck)
		for _, s := range stuck {
			if now[s] < failed[s]+5 {
				return false
			}
		}
		return true
	})
	if n := l.Accounted(); n != rest {
		t.Fatalf("%d messages accounted while the stuck sessions fail; want %d", n, rest)
	}
	g.open.Store(true)
	w.finished(c, cfg.Group, topic, l, 3*time.Minute)
	o.waitFor(t, "no session parked", time.Minute, func() bool { ss, _ := w.parked(); return ss == 0 })
	released, maxWait := w.results()
	checkGrowth(t, gp, cr, len(sessions)*backlog, released, maxWait)
	o.check(t)
	c.readDLQ(t, dlq, l)
	r := l.Report()
	assertClean(t, c, r, time.Since(start), false)
	if r.DeadLettered != 0 {
		t.Fatalf("%d dead-lettered; want none (no park budget spent)", r.DeadLettered)
	}
}

// stuckAcross picks the stuck sessions: three that a growth from old to
// grown partitions moves (Kafka's partitioner), from both old partitions,
// and one it does not.
func stuckAcross(t *testing.T, sessions []string, old, grown int) []string {
	t.Helper()
	pl := hashring.Placement{Scheme: hashring.SchemeKafka}
	var out []string
	from := map[int]int{} // old partition → moved sessions picked from it
	moved, still := 0, false
	for _, s := range sessions {
		a, _ := pl.Partition([]byte(s), old)
		b, _ := pl.Partition([]byte(s), grown)
		switch {
		case a == b && !still:
			still = true
		case a != b && moved < 3 && from[a] < 2:
			moved++
			from[a]++
		default:
			continue
		}
		out = append(out, s)
		t.Logf("stuck session %s: partition %d of %d, %d of %d", s, a, old, b, grown)
	}
	if moved != 3 || !still || len(from) != old {
		t.Fatalf("stuck sessions %v: want 3 moved, from each of the %d old partitions, and 1 not moved", out, old)
	}
	return out
}

// work is the handler of a gated scenario: a stuck session fails while
// its gate is closed; the rest is growthWork.
func (g *stuckGate) work() consumer.Handler {
	h := growthWork()
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if s, _, _ := strings.Cut(string(m.Record.Value), "|"); g.stuck[s] && !g.open.Load() {
			return errStuck
		}
		return h.Handle(ctx, m)
	})
}

// startWith runs one more member of w, handling with h.
func (w *growthWatch) startWith(name string, cfg consumer.Config, h consumer.Handler) *member {
	w.t.Helper()
	m := startMember(w.t, name, cfg, h)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = append(w.members, m)
	return m
}

// parked sums the parked sessions and records over w's members.
func (w *growthWatch) parked() (sessions, records int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.members {
		s, _, r := parked(m.c)
		sessions, records = sessions+s, records+r
	}
	return sessions, records
}

// movedParked sums Stats.MovedParked over w's members.
func (w *growthWatch) movedParked() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, m := range w.members {
		n += m.c.Stats().MovedParked
	}
	return n
}

// movedOf returns those of sessions whose messages went to more than one
// partition.
func (gp *growthProducer) movedOf(sessions []string) []string {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	var out []string
	for _, s := range sessions {
		if len(gp.parts[s]) > 1 {
			out = append(out, s)
		}
	}
	return out
}

// orderWatch sees every call as it starts, before the ledger's verdict at
// the end: a call of a session's record newer than its oldest unhandled
// one is a record handled (tried) while an older one is parked or
// unhandled. It counts each session's failed calls.
type orderWatch struct {
	mu     sync.Mutex
	next   map[string]int // session → its oldest seq not yet handled
	failed map[string]int
	early  []string // the first few calls out of order
}

func (o *orderWatch) wrap(h consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		s, v, _ := strings.Cut(string(m.Record.Value), "|")
		seq, err := strconv.Atoi(v)
		if err != nil {
			return consumer.Permanent(err)
		}
		o.mu.Lock()
		if next := o.next[s]; seq > next && len(o.early) < 10 {
			o.early = append(o.early, fmt.Sprintf("%s seq %d (partition %d offset %d, attempt %d) ran while seq %d was unhandled",
				s, seq, m.Record.Partition, m.Record.Offset, m.Attempt, next))
		}
		o.mu.Unlock()
		err = h.Handle(ctx, m)
		o.mu.Lock()
		defer o.mu.Unlock()
		switch {
		case err != nil:
			o.failed[s]++
		case seq == o.next[s]:
			o.next[s]++
		}
		return err
	})
}

// check fails t if a call ran out of order.
func (o *orderWatch) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.early) > 0 {
		t.Fatalf("a newer record of a session ran while an older one was parked or unhandled:\n%s", strings.Join(o.early, "\n"))
	}
}

// failures copies the failed calls of sessions.
func (o *orderWatch) failures(sessions []string) map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for _, s := range sessions {
		out[s] = o.failed[s]
	}
	return out
}

// waitFor is waitFor (polling Stats) that fails as soon as a call ran
// out of order.
func (o *orderWatch) waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	waitFor(t, what, limit, func() bool {
		o.check(t)
		return cond()
	})
}
