package consumer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The attempt context against context.WithTimeout started at the same
// moment, for timeouts from a nanosecond to the largest a Config accepts:
// the same error (none, DeadlineExceeded, Canceled or the parent's), the
// same cause, the same deadline (to the read of the clock between them),
// one that reads the same on every call, and contexts derived from it that
// end with it. Randomized: the timeout, whether the parent is cancelled,
// whether Done is armed first, whether the attempt is released.
func TestAttemptCtxLikeWithTimeout(t *testing.T) {
	timeouts := []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Hour,
		100 * 365 * 24 * time.Hour, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	cause := errors.New("the parent's cause")
	for i := 0; i < 400; i++ {
		timeout := timeouts[rng.IntN(len(timeouts))]
		cancelParent, askDone, release := rng.IntN(3) == 0, rng.IntN(2) == 0, rng.IntN(4) == 0
		parent, cancel := context.WithCancelCause(context.Background())
		before := time.Now()
		a := newAttemptCtx(parent, stampNow(), timeout)
		want, stop := context.WithTimeout(parent, timeout)
		after := time.Now()
		d, ok := a.Deadline()
		wd, _ := want.Deadline()
		// A deadline past the largest stamp is the largest stamp's time:
		// earlier than context.WithTimeout's by as long as this process ran,
		// still out of reach.
		low := before.Add(timeout).Add(-time.Millisecond)
		if last := timeOfStamp(math.MaxInt64); last.Before(low) {
			low = last.Add(-time.Millisecond)
		}
		if !ok || d.Before(low) || d.After(after.Add(timeout).Add(time.Millisecond)) {
			t.Fatalf("timeout %v: deadline %v, context.WithTimeout's %v", timeout, d, wd)
		}
		// A deadline past 2157 has no monotonic reading (time.Time keeps
		// none so far out); its wall reading is today's, read anew each
		// call, so it may move by the time between time.Now's reads of the
		// wall and the monotonic clock: nanoseconds, or as long as the
		// thread was preempted between them on a busy machine.
		if again, _ := a.Deadline(); !again.Equal(d) && (d != d.Round(0) || again.Sub(d).Abs() > time.Second) {
			t.Fatalf("timeout %v: deadline read again is %v, was %v", timeout, again, d)
		}
		if askDone {
			_ = a.Done()
		}
		child, stopChild := context.WithCancel(a)
		if cancelParent {
			cancel(cause)
		}
		if release {
			a.release()
			stop()
		}
		// A short timeout has passed once both report done; a long one
		// never has in a test.
		if cancelParent || release || timeout <= time.Millisecond {
			<-a.Done()
			<-want.Done()
			<-child.Done()
		}
		// A short timeout and a cancellation race: either end is right.
		raced := timeout <= time.Millisecond && (cancelParent || release)
		if got, w := a.Err(), want.Err(); got != w && !(raced && (got == context.DeadlineExceeded || w == context.DeadlineExceeded)) {
			t.Fatalf("timeout %v, parent cancelled %v, released %v: Err %v, context.WithTimeout's %v",
				timeout, cancelParent, release, got, w)
		}
		// Known difference: an attempt that ended on its own (deadline,
		// release) before its parent was cancelled with a cause reports
		// the parent's cause; it has no cancelCtx of its own to hold one.
		if got, w := context.Cause(a), context.Cause(want); got != w && !raced && !(cancelParent && w != cause) {
			t.Fatalf("timeout %v, parent cancelled %v, released %v: Cause %v, context.WithTimeout's %v",
				timeout, cancelParent, release, got, w)
		}
		if (child.Err() == nil) != (a.Err() == nil) {
			t.Fatalf("timeout %v: derived context's Err %v, the attempt's %v", timeout, child.Err(), a.Err())
		}
		stopChild()
		a.release()
		stop()
		cancel(nil)
	}
}
