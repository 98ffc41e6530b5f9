package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The model-based test of revokes, losses and the shutdown, on the real
// partitions, owners, drainRevoked/revoke and drainOnStop, in a synctest
// bubble (time is simulated: a run of minutes takes microseconds, and
// "when" is exact). Random steps: handler attempts start (most honour
// their context, some ignore it, each runs a random time), partitions are
// assigned, revoked (as franz-go does: one callback at a time) or lost,
// and the shutdown begins at any step — also while a revoke drains. After
// every run the recorded history is checked against the rules:
//
//   - an attempt that honours its context has returned when its partition
//     is released (revoke, loss, shutdown): it never overlaps the next
//     owner;
//   - a revoke's drain ends by RevokeTimeout, and by the shutdown's drain
//     deadline when one began meanwhile;
//   - the shutdown's drain ends by ShutdownTimeout after it began, and
//     every commit deadline after that is at most ShutdownTimeout +
//     CommitTimeout after it began;
//   - RevokeOverruns counts exactly the revoked partitions released while
//     an attempt that ignores its context still ran.

type stopAttempt struct {
	p          *partition
	honours    bool
	start, end time.Time
	ended      bool
}

type stopRevoke struct {
	parts      []*partition
	start, end time.Time
	overruns   int // partitions released with an ignoring attempt running
}

type stopModel struct {
	t   *testing.T
	rng *rand.Rand
	c   *Consumer
	cfg Config

	mu       sync.Mutex // guards what attempts and callbacks write
	attempts []*stopAttempt
	revokes  []*stopRevoke
	released map[*partition]time.Time

	callback   chan struct{} // closed when the running rebalance callback returns; nil: none
	nextOffset map[*partition]int64
	stopAt     time.Time // zero until the shutdown began
	drainedAt  time.Time // when its drain ended
	cancelPoll context.CancelFunc
	bg         sync.WaitGroup
	steps      []string
}

func newStopModel(t *testing.T, seed uint64) *stopModel {
	rng := rand.New(rand.NewPCG(seed, 7))
	unit := time.Second
	cfg := Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d",
		RevokeTimeout:   time.Duration(2+rng.IntN(20)) * unit,
		ShutdownTimeout: time.Duration(1+rng.IntN(20)) * unit,
		CommitTimeout:   time.Duration(1+rng.IntN(5)) * unit,
		HandlerTimeout:  time.Duration(1+rng.IntN(60)) * unit,
	}
	cfg, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	c, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.crashed.Store(true) // commits are not the subject here: no client
	c.workCtx, c.cancelWork = context.WithCancel(context.Background())
	c.own.work = c.workCtx
	return &stopModel{t: t, rng: rng, c: c, cfg: cfg, released: map[*partition]time.Time{}, nextOffset: map[*partition]int64{}}
}

func (m *stopModel) logf(format string, args ...any) {
	m.steps = append(m.steps, fmt.Sprintf("%v ", time.Now().Format("15:04:05.000"))+fmt.Sprintf(format, args...))
}

func (m *stopModel) failf(format string, args ...any) {
	m.t.Helper()
	tail := m.steps[max(len(m.steps)-30, 0):]
	m.t.Fatalf("%s\nRevokeTimeout %v ShutdownTimeout %v CommitTimeout %v HandlerTimeout %v\nlast steps:\n  %s",
		fmt.Sprintf(format, args...), m.cfg.RevokeTimeout, m.cfg.ShutdownTimeout, m.cfg.CommitTimeout, m.cfg.HandlerTimeout,
		strings.Join(tail, "\n  "))
}

// busy reports whether a rebalance callback runs (franz-go runs one at a
// time).
func (m *stopModel) busy() bool {
	if m.callback == nil {
		return false
	}
	select {
	case <-m.callback:
		m.callback = nil
		return false
	default:
		return true
	}
}

// runCallback runs f as the rebalance callback, on its own goroutine.
func (m *stopModel) runCallback(f func()) {
	done := make(chan struct{})
	m.callback = done
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer close(done)
		f()
	}()
}

func (m *stopModel) assign() {
	id := int32(len(m.nextOffset))
	parts := m.c.own.assign(map[string][]int32{"t": {id}}, 1<<20, nil)
	m.nextOffset[parts[0]] = 0
	m.logf("assign t/%d fenced=%v", id, parts[0].isFenced())
}

// attempt admits one record to a random owned partition and, when it may
// start, runs a handler attempt for it.
func (m *stopModel) attempt() {
	owned := m.c.own.all()
	if len(owned) == 0 {
		return
	}
	p := owned[m.rng.IntN(len(owned))]
	off := m.nextOffset[p]
	m.nextOffset[p]++
	var seq uint64
	var queued bool
	p.admit([]*kgo.Record{{Topic: "t", Partition: p.key.partition, Offset: off}}, off+1, nil,
		func(_ int, s uint64) { seq, queued = s, true })
	if !queued {
		return
	}
	if !p.start(seq) {
		return // fenced (a callback may run meanwhile); partition_model_test checks the rule
	}
	a := &stopAttempt{p: p, honours: m.rng.IntN(5) > 0, start: time.Now()}
	d := time.Duration(m.rng.Int64N(int64(3 * m.cfg.RevokeTimeout)))
	m.logf("attempt t/%d@%d honours=%v for %v", p.key.partition, off, a.honours, d)
	m.mu.Lock()
	m.attempts = append(m.attempts, a)
	m.mu.Unlock()
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		ctx := newAttemptCtx(p.attempts, stampOf(a.start), m.cfg.HandlerTimeout)
		if a.honours {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		} else {
			time.Sleep(d)
		}
		ctx.release()
		m.mu.Lock()
		a.end, a.ended = time.Now(), true
		m.mu.Unlock()
		p.finish(seq, true)
	}()
}

// revoke revokes a random subset of the owned partitions.
func (m *stopModel) revoke() {
	var parts []*partition
	for _, p := range m.c.own.all() {
		if m.rng.IntN(2) == 0 {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return
	}
	r := &stopRevoke{parts: parts, start: time.Now()}
	m.logf("revoke %d partitions", len(parts))
	m.mu.Lock()
	m.revokes = append(m.revokes, r)
	m.mu.Unlock()
	m.runCallback(func() {
		before := m.c.stats.revokeOverruns.Load()
		m.c.revoke(context.Background(), parts)
		now := time.Now()
		m.mu.Lock()
		defer m.mu.Unlock()
		r.end = now
		r.overruns = int(m.c.stats.revokeOverruns.Load() - before)
		for _, p := range parts {
			m.released[p] = now
		}
	})
}

// lose loses a random owned partition: released at once.
func (m *stopModel) lose() {
	owned := m.c.own.all()
	if len(owned) == 0 {
		return
	}
	p := owned[m.rng.IntN(len(owned))]
	m.logf("lose t/%d", p.key.partition)
	m.runCallback(func() {
		m.c.own.release([]*partition{p})
		m.mu.Lock()
		m.released[p] = time.Now()
		m.mu.Unlock()
	})
}

// shutdown begins the shutdown: drainOnStop on its goroutine, as Run
// starts it; the rest of the shutdown (after the poll loop returned)
// releases what is still owned once the drain is over.
func (m *stopModel) shutdown() {
	m.stopAt = time.Now()
	m.logf("shutdown begins")
	pollCtx, cancel := context.WithCancel(context.Background())
	m.cancelPoll = cancel
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.c.drainOnStop(pollCtx, func() {})
		m.mu.Lock()
		m.drainedAt = time.Now()
		m.mu.Unlock()
	}()
	cancel()
}

// finishShutdown does what Run's shutdown does once its poll loop
// returned (after any callback under way): wait for the drain, check the
// final commit's deadline, release what is still owned.
func (m *stopModel) finishShutdown() {
	<-m.c.stop.done
	m.mu.Lock()
	drained := m.drainedAt
	m.mu.Unlock()
	if lim := m.stopAt.Add(m.cfg.ShutdownTimeout); drained.After(lim) {
		m.failf("shutdown drain ended %v after it began, ShutdownTimeout %v", drained.Sub(m.stopAt), m.cfg.ShutdownTimeout)
	}
	for m.busy() {
		<-m.callback
	}
	now := time.Now()
	if d, lim := m.c.finalDeadline(now), m.stopAt.Add(m.cfg.ShutdownTimeout+m.cfg.CommitTimeout); d.After(lim) {
		m.failf("final commit deadline %v after the shutdown began, bound %v", d.Sub(m.stopAt), lim.Sub(m.stopAt))
	}
	owned := m.c.own.all()
	m.c.own.release(owned)
	m.mu.Lock()
	for _, p := range owned {
		m.released[p] = now
	}
	m.mu.Unlock()
}

func (m *stopModel) run(steps int) {
	shutdownAt := m.rng.IntN(steps)
	for i := 0; i < steps; i++ {
		if i == shutdownAt {
			m.shutdown()
		}
		switch op := m.rng.IntN(100); {
		case op < 45:
			m.attempt()
		case op < 55:
			if !m.busy() {
				m.assign()
			}
		case op < 65:
			if !m.busy() {
				m.revoke()
			}
		case op < 70:
			if !m.busy() {
				m.lose()
			}
		default:
			time.Sleep(time.Duration(m.rng.Int64N(int64(m.cfg.RevokeTimeout))))
		}
	}
	m.finishShutdown()
	m.bg.Wait()
	m.check()
}

func (m *stopModel) check() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.attempts {
		rel, ok := m.released[a.p]
		if !ok {
			m.failf("t/%d never released", a.p.key.partition)
		}
		if a.honours && a.end.After(rel) {
			m.failf("t/%d: an attempt that honours its context ran %v past its partition's release",
				a.p.key.partition, a.end.Sub(rel))
		}
	}
	for _, r := range m.revokes {
		lim := r.start.Add(m.cfg.RevokeTimeout)
		if !m.stopAt.IsZero() {
			lim = minTime(lim, maxTime(r.start, m.stopAt.Add(m.cfg.ShutdownTimeout)))
		}
		allHonour := true
		want := 0
		for _, p := range r.parts {
			ignoring := false
			for _, a := range m.attempts {
				if a.p == p && !a.honours && a.start.Before(r.end) && (!a.ended || a.end.After(r.end)) {
					ignoring = true
				}
				if a.p == p && !a.honours && a.start.Before(r.end) && a.end.After(r.start) {
					allHonour = false
				}
			}
			if ignoring {
				want++
			}
		}
		if allHonour && r.end.After(lim) {
			m.failf("a revoke of handlers that honour their context ended %v after it began, bound %v", r.end.Sub(r.start), lim.Sub(r.start))
		}
		if r.overruns != want {
			m.failf("a revoke counted %d overruns, %d partitions were released with an ignoring attempt running", r.overruns, want)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func TestStopModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		synctest.Test(t, func(t *testing.T) {
			m := newStopModel(t, seed)
			m.assign()
			m.assign()
			m.run(60)
		})
	}
}
