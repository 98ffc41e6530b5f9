package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// tally is every consumer's handler in a benchmark run and its referee. It
// checks every message against its session's previous one and records its
// latency, with a few atomic operations and no lock: the lanestest Ledger
// keeps every call under one mutex with maps keyed by event ID, which at
// millions of messages a second would measure the ledger, not the consumer.
type tally struct {
	w     workload
	total int64
	// base is the latency origin in closed mode (the run's start: every
	// message of the backlog was there from the beginning); in open mode
	// each record carries its intended send time.
	base atomic.Int64 // Unix ns

	next []atomic.Uint32 // per session: the seq expected next
	busy []atomic.Bool   // per session: a handler call is running
	lat  []int64         // per message index: ns from intended send to handled

	done, violations, overlaps, attempts atomic.Int64
	primed                               atomic.Int64
	q10, q90                             int64
	t10, t90                             atomic.Int64 // ns since base when done reached q10, q90
	first, last                          atomic.Int64 // Unix ns: the first attempt's start, the last message handled
	finished                             chan struct{}
	finishOnce                           sync.Once
}

var errInjected = errors.New("injected transient failure")

func newTally(w workload, base time.Time) *tally {
	t := &tally{w: w, total: int64(w.Messages),
		next: make([]atomic.Uint32, w.Sessions), busy: make([]atomic.Bool, w.Sessions),
		lat: make([]int64, w.Messages), q10: max(1, int64(w.Messages)/10), q90: max(1, int64(w.Messages)*9/10),
		finished: make(chan struct{})}
	t.base.Store(base.UnixNano())
	return t
}

// handle is one handler attempt for a record value.
func (t *tally) handle(v []byte, attempt int) error {
	sess, seq, idx, intended, ok := decodeValue(v)
	if !ok || int(sess) >= len(t.next) && sess != primeSession || int(idx) >= len(t.lat) {
		t.violations.Add(1) // not a record of this run
		return nil
	}
	if sess == primeSession {
		t.primed.Add(1)
		return nil
	}
	if t.attempts.Add(1) == 1 {
		t.first.Store(time.Now().UnixNano())
	}
	if t.busy[sess].CompareAndSwap(false, true) {
		defer t.busy[sess].Store(false)
	} else {
		t.overlaps.Add(1)
	}
	if t.w.Work > 0 {
		time.Sleep(t.w.Work)
	}
	if t.w.fails(sess, seq, attempt) {
		return errInjected
	}
	now := time.Now().UnixNano()
	if t.next[sess].Load() != seq {
		t.violations.Add(1) // a gap, a repeat, or an overtaking
	}
	t.next[sess].Store(seq + 1)
	base := t.base.Load()
	from := base
	if intended != 0 {
		from = intended
	}
	t.lat[idx] = max(1, now-from) // 0 marks a message not handled
	t.last.Store(now)
	n := t.done.Add(1)
	if n == t.q10 {
		t.t10.Store(now - base)
	}
	if n == t.q90 {
		t.t90.Store(now - base)
	}
	if t.done.Load() >= t.total {
		t.finishOnce.Do(func() { close(t.finished) })
	}
	return nil
}

// handleRetrying is how the baselines handle a record: attempts in place,
// waiting the workload's retry schedule between them, until one succeeds
// or ctx ends.
func (t *tally) handleRetrying(ctx context.Context, v []byte) {
	for a := 1; ctx.Err() == nil; a++ {
		if t.handle(v, a) == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(t.w.wait(a)):
		}
	}
}

// waitPrimed waits until n priming records were handled.
func (t *tally) waitPrimed(ctx context.Context, n int) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.primed.Load() < int64(n) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
