package consumer

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Limits on the attempts running at once: the member's turns
// (Config.MaxConcurrency) and a resource's slots (Throttle, held by the
// control gate), taken as an attempt passes the gate (gate.go: admitAttempt).

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

// take waits, until ctx ends, for a turn, behind every attempt already
// waiting.
func (t *turns) take(ctx context.Context) error {
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	return t.sem.Acquire(ctx, 1)
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
