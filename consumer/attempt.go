package consumer

import (
	"context"
	"math"
	"sync"
	"time"
)

// attemptCtx is the context of one handler attempt: the work context plus
// the HandlerTimeout deadline. Its timer is armed only when someone first
// asks for Done, so a handler that never waits on its context costs no timer
// at all, while one that does sees exactly context.WithTimeout's behaviour.
type attemptCtx struct {
	context.Context       // the work context: values and cancellation
	deadline        int64 // a stamp (clock.go): the attempt's start plus HandlerTimeout

	mu         sync.Mutex
	done       chan struct{}
	closed     bool
	err        error
	stopTimer  func() bool
	stopParent func() bool
}

// newAttemptCtx is the context of an attempt that started at start, a stamp.
func newAttemptCtx(parent context.Context, start int64, timeout time.Duration) *attemptCtx {
	a := &attemptCtx{}
	a.init(parent, start, timeout)
	return a
}

// init prepares a zero attemptCtx (one embedded in a larger value). A
// deadline past the largest stamp (a timeout near time.Duration's largest,
// "none") is the largest stamp: never reached.
func (a *attemptCtx) init(parent context.Context, start int64, timeout time.Duration) {
	a.Context, a.deadline = parent, start+int64(timeout)
	if a.deadline < start {
		a.deadline = math.MaxInt64
	}
}

// Deadline is the attempt's start plus HandlerTimeout. Its monotonic
// reading is exact, so every call's answer is Equal and time.Until is
// right; its wall reading is taken anew on each call (clock.go).
func (a *attemptCtx) Deadline() (time.Time, bool) { return timeOfStamp(a.deadline), true }

func (a *attemptCtx) Done() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		return a.done
	}
	if a.err == nil {
		a.refreshLocked() // before done exists: only the error is set
	}
	a.done = make(chan struct{})
	if a.err != nil {
		a.closed = true
		close(a.done)
		return a.done
	}
	t := time.AfterFunc(time.Duration(a.deadline-stampNow()), func() { a.cancel(context.DeadlineExceeded) })
	a.stopTimer = t.Stop
	a.stopParent = context.AfterFunc(a.Context, func() { a.cancel(a.Context.Err()) })
	return a.done
}

func (a *attemptCtx) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.refreshLocked()
	}
	return a.err
}

// refreshLocked notices a passed deadline or a cancelled parent without a
// timer. a.mu held.
func (a *attemptCtx) refreshLocked() {
	if err := a.Context.Err(); err != nil {
		a.finishLocked(err)
	} else if stampNow() >= a.deadline {
		a.finishLocked(context.DeadlineExceeded)
	}
}

func (a *attemptCtx) cancel(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finishLocked(err)
}

func (a *attemptCtx) finishLocked(err error) {
	if a.err == nil {
		a.err = err
	}
	if a.done != nil && !a.closed {
		a.closed = true
		close(a.done)
	}
}

// release ends the attempt: it cancels the context (as the cancel func of
// context.WithTimeout would) and frees its timer.
func (a *attemptCtx) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopTimer != nil {
		a.stopTimer()
		a.stopParent()
	}
	a.finishLocked(context.Canceled)
}
