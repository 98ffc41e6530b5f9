package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tally is every consumer's handler in a benchmark run and its referee. It
// checks every message against its session's previous one and records its
// latency, with a few atomic operations and no lock: the lanestest Ledger
// keeps every call under one mutex with maps keyed by event ID, which at
// millions of messages a second would measure the ledger, not the consumer.
//
// What a call writes is its session's own: the session's counters share no
// cache line with another session's, and its messages' slots are side by
// side (session-major). A counter or slot array that every call wrote would
// make the cores of a parallel consumer fight over its cache lines on every
// message, a cost raw polling (one goroutine) would not pay: the tally would
// measure itself again. The steady window and the run's end are read from
// the messages' completion times once the run is over.
type tally struct {
	w     workload
	total int64
	// unordered: the consumer keeps no order (consNone), so only a
	// message handled twice counts as a violation, and no call overlaps.
	unordered bool
	// base is the latency origin in closed mode (the run's start: every
	// message of the backlog was there from the beginning); in open mode
	// each record carries its intended send time.
	base atomic.Int64 // Unix ns

	sess []sessionTally
	off  []int   // per session: its first message slot
	lat  []int64 // per message slot: ns from intended send (or base) to handled
	at   []int64 // per message slot: when it was handled, Unix ns

	left                 atomic.Int64 // sessions not yet complete
	violations, overlaps atomic.Int64
	primed               atomic.Int64
	first                atomic.Int64 // Unix ns: the first attempt's start
	finished             chan struct{}
	finishOnce           sync.Once
}

// sessionTally is one session's counters, alone on their cache line.
type sessionTally struct {
	next atomic.Uint32 // the seq expected next
	busy atomic.Bool   // a handler call is running
	want int64         // its messages in the plan
	done atomic.Int64  // its messages handled
	last atomic.Int64  // Unix ns: its last message handled
	_    [32]byte
}

var errInjected = errors.New("injected transient failure")

func newTally(w workload, p plan, base time.Time) *tally {
	t := &tally{w: w, total: int64(w.Messages), sess: make([]sessionTally, w.Sessions), off: make([]int, w.Sessions),
		lat: make([]int64, w.Messages), at: make([]int64, w.Messages), finished: make(chan struct{})}
	n, live := 0, int64(0)
	for s, k := range p.perSess {
		t.off[s], t.sess[s].want = n, int64(k)
		n += k
		if k > 0 {
			live++
		}
	}
	t.left.Store(live)
	t.base.Store(base.UnixNano())
	return t
}

// handle is one handler attempt for a record value.
func (t *tally) handle(v []byte, attempt int) error {
	sess, seq, _, intended, ok := decodeValue(v)
	if sess == primeSession && ok {
		t.primed.Add(1)
		return nil
	}
	if !ok || int(sess) >= len(t.sess) || int64(seq) >= t.sess[sess].want {
		t.violations.Add(1) // not a record of this run
		return nil
	}
	if t.first.Load() == 0 {
		t.first.CompareAndSwap(0, time.Now().UnixNano())
	}
	st := &t.sess[sess]
	if !t.unordered { // an unordered consumer runs a session's records at once
		if st.busy.CompareAndSwap(false, true) {
			defer st.busy.Store(false)
		} else {
			t.overlaps.Add(1)
		}
	}
	if t.w.Work > 0 {
		time.Sleep(t.w.Work)
	}
	if t.w.fails(sess, seq, attempt) {
		return errInjected
	}
	now := time.Now().UnixNano()
	slot := t.off[sess] + int(seq)
	switch {
	case t.unordered:
		if t.at[slot] != 0 {
			t.violations.Add(1) // a repeat
		}
	case st.next.Load() != seq:
		t.violations.Add(1) // a gap, a repeat, or an overtaking
	}
	st.next.Store(seq + 1)
	from := t.base.Load()
	if intended != 0 {
		from = intended
	}
	t.lat[slot] = max(1, now-from) // 0 marks a message not handled
	t.at[slot] = now
	st.last.Store(now)
	if st.done.Add(1) == st.want && t.left.Add(-1) == 0 {
		t.finishOnce.Do(func() { close(t.finished) })
	}
	return nil
}

// handled is how many messages were handled so far (repeats included).
func (t *tally) handled() int64 {
	var n int64
	for i := range t.sess {
		n += t.sess[i].done.Load()
	}
	return n
}

// lastHandled is when the last message was handled, Unix ns.
func (t *tally) lastHandled() int64 {
	var last int64
	for i := range t.sess {
		last = max(last, t.sess[i].last.Load())
	}
	return last
}

// completions are the times the handled messages were handled, ns since
// base, in order.
func (t *tally) completions() []time.Duration {
	base := t.base.Load()
	out := make([]time.Duration, 0, len(t.at))
	for _, at := range t.at {
		if at != 0 {
			out = append(out, time.Duration(at-base))
		}
	}
	slices.Sort(out)
	return out
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
