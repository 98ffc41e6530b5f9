package consumer

import (
	"sync/atomic"
	"time"
)

// clock stamps attempt starts (the handler's deadline, the watchdog's
// "running since") with one read of the monotonic clock: time.Now reads
// the wall clock too, a second system clock read per record. The time it
// gives is its base plus the monotonic time elapsed since; the watchdog
// rebases it on every tick, so its wall reading never strays from the
// system's by more than the clock's drift over one tick (at most a
// second), and a step of the system clock shows after at most one tick.
type clock struct{ base atomic.Pointer[time.Time] }

func newClock() *clock {
	k := &clock{}
	k.rebase(time.Now())
	return k
}

// now is the current time, with a monotonic reading.
func (k *clock) now() time.Time {
	b := k.base.Load()
	return b.Add(time.Since(*b))
}

// rebase sets the base to t, a time.Now reading.
func (k *clock) rebase(t time.Time) { k.base.Store(&t) }
