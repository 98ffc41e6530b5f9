package consumer

import (
	"sync/atomic"
	"time"
)

// clock stamps attempt starts (the handler's deadline, the watchdog's
// "running since", the handler-duration metric) with one read of the
// monotonic clock: time.Now reads the wall clock too, a second system clock
// read per record.
//
// now is its base plus the monotonic time elapsed since: its monotonic
// reading is exact, so deadlines and durations are; its wall reading may
// lag a step of the system clock until the watchdog rebases it (every
// tick, at most a second). What is compared across goroutines (an
// attempt's start against the watchdog's tick) is a stamp: monotonic
// nanoseconds since the clock's origin, which no clock step moves.
type clock struct {
	origin time.Time // fixed: the zero of stamps
	base   atomic.Pointer[time.Time]
}

func newClock() *clock {
	k := &clock{origin: time.Now()}
	k.rebase(k.origin)
	return k
}

// now is the current time, with a monotonic reading.
func (k *clock) now() time.Time {
	b := k.base.Load()
	return b.Add(time.Since(*b))
}

// rebase sets the base to t, a time.Now reading.
func (k *clock) rebase(t time.Time) { k.base.Store(&t) }

// stamp is t as nanoseconds since the origin, by the monotonic clock when t
// has a reading (every time.Now and now does); never 0 for a time after
// the origin, so 0 can mean "none".
func (k *clock) stamp(t time.Time) int64 { return int64(t.Sub(k.origin)) + 1 }
