package consumer

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// turns bounds the handler attempts running at once across the member
// (Config.MaxConcurrency). An attempt takes a turn before it starts and
// gives it back when it returns; waiters are served in the order they
// asked (semaphore.Weighted is FIFO), so a session's next record asks
// behind every attempt already waiting: a hot session takes one turn at a
// time. A nil *turns bounds nothing.
type turns struct {
	sem     *semaphore.Weighted
	waiting atomic.Int64 // attempts waiting for a turn
}

// newTurns returns the bound of n turns, nil for n 0 (no bound).
func newTurns(n int) *turns {
	if n == 0 {
		return nil
	}
	return &turns{sem: semaphore.NewWeighted(int64(n))}
}

// takeFor waits for a turn for w, started: false, with no turn taken,
// when w's partition is fenced or w is done (skipped as stalled) first, as
// a record queued in its lane would drop out (a revoke's drain does not
// wait for the turns of its records).
func (t *turns) takeFor(w *work) bool {
	if t.sem.TryAcquire(1) {
		return true
	}
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	return acquireFor(w, func(ctx context.Context) error { return t.sem.Acquire(ctx, 1) }, t.give)
}

// acquireFor runs acquire for w under a context that ends when w's
// partition is fenced or w is done (skipped as stalled); it reports false,
// with what was acquired given back by release, when either happened.
func acquireFor(w *work, acquire func(context.Context) error, release func()) bool {
	ctx, cancel := context.WithCancel(w.p.attempts)
	watched := make(chan struct{})
	go func() { // owned here: ended and waited for before acquireFor returns
		defer close(watched)
		w.p.untilStale(ctx, w.seq, cancel)
	}()
	err := acquire(ctx)
	cancel()
	<-watched
	if err != nil {
		return false
	}
	if w.p.isFenced() || w.p.isDone(w.seq) { // both may have happened as it got it
		release()
		return false
	}
	return true
}

// give returns a turn taken.
func (t *turns) give() {
	if t != nil {
		t.sem.Release(1)
	}
}

// waiters is how many attempts wait for a turn.
func (t *turns) waiters() int {
	if t == nil {
		return 0
	}
	return int(t.waiting.Load())
}

// untilStale calls stale once p is fenced or its record seq is done,
// unless ctx ends first (then it returns at once).
func (p *partition) untilStale(ctx context.Context, seq uint64, stale func()) {
	for {
		p.mu.Lock()
		done, marked := p.tr.IsDone(seq), p.marked
		p.mu.Unlock()
		if done {
			stale()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-p.fence:
			stale()
			return
		case <-marked:
		}
	}
}
