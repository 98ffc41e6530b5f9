package consumer

import "time"

// Attempt starts (the handler's deadline, the watchdog's "running since",
// the handler-duration metric) are stamps: monotonic nanoseconds since
// stampOrigin. Reading one is one read of the monotonic clock, where
// time.Now reads the wall clock too, a second system clock read per record;
// and no step of the system's wall clock moves a stamp, so the watchdog's
// comparisons hold across one. A stamp becomes a time.Time only when a
// handler asks its context for the deadline (timeOfStamp).
var stampOrigin = time.Now()

// stampNow is the current stamp; never 0, so 0 can mean "none".
func stampNow() int64 { return int64(time.Since(stampOrigin)) + 1 }

// stampOf is t's stamp, by the monotonic clock when t has a reading (every
// time.Now does; a time without one is placed by its wall clock).
func stampOf(t time.Time) int64 { return int64(t.Sub(stampOrigin)) + 1 }

// timeOfStamp is the time of stamp s against the system clock now: its
// monotonic reading is exactly s's, its wall reading today's.
func timeOfStamp(s int64) time.Time {
	now := time.Now()
	return now.Add(time.Duration(s - stampOf(now)))
}
