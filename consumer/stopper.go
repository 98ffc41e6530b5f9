package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The shutdown's clock (stopper) and the partition take-ups it waits for
// (takeUps); the shutdown itself is shutdown.go's.

// stopper is the shutdown's clock and its drain's result. The shutdown
// starts the moment Run's context is cancelled (drainOnStop), whatever the
// poll loop is doing: it may be held in PollRecords by a rebalance callback
// (a revoke draining its own handlers) for as long as that callback runs.
// Every later step, and a revoke that commits meanwhile, keeps a deadline
// counted from that moment, so Run's bound holds in every interleaving.
type stopper struct {
	began atomic.Int64 // when the shutdown began, Unix nanoseconds; 0 before
	// begun ends when the shutdown begins (begin): what a partition's
	// take-up does that only serves handling (rebuilding parked sets) ends
	// with it.
	begun context.Context
	begin context.CancelFunc

	done chan struct{} // closed once the drain is over (made by drainOnStop)
	left []*partition  // still running handlers when it ended; read after done
	all  []*partition  // the partitions it fenced; read after done
}

// beganAt reports when the shutdown began.
func (s *stopper) beganAt() (time.Time, bool) {
	n := s.began.Load()
	return time.Unix(0, n), n != 0
}

// takeUps counts the partition take-ups under way (onAssigned): the
// shutdown's final commit waits for them, as a take-up during the
// shutdown reads the start positions that commit hands on. The poll loop
// does not: it may have ended before the take-up began.
type takeUps struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0
}

func (t *takeUps) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
}

func (t *takeUps) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n--; t.n == 0 {
		close(t.idle)
	}
}

// wait waits until no take-up is under way, or ctx ends.
func (t *takeUps) wait(ctx context.Context) {
	t.mu.Lock()
	idle, busy := t.idle, t.n > 0
	t.mu.Unlock()
	if busy {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
}

// untilShutdown is ctx, ended also when the shutdown begins; call its
// cancel when done.
func (s *stopper) untilShutdown(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.begun, cancel)
	return ctx, func() { stop(); cancel() }
}
