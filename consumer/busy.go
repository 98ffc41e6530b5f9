package consumer

import (
	"math"
	"sync"
	"time"
)

// busyness is how many handler attempts the member runs, averaged over
// about busyWindow: the watchdog counts the attempts running at each tick,
// and the average decays the older counts exponentially. It is the
// autoscaling signal (Stats.Busy, the lanes.consumer.busy metric): with
// MaxConcurrency set, Busy ÷ MaxConcurrency says how much of what the
// member may run it runs.
type busyness struct {
	mu   sync.Mutex
	avg  float64
	last time.Time
}

// busyWindow is the time constant of Stats.Busy's average (a variable for tests).
var busyWindow = 10 * time.Second

// sample adds n attempts running at now.
func (b *busyness) sample(n int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.avg, b.last = float64(n), now
		return
	}
	dt := now.Sub(b.last)
	if dt <= 0 {
		return
	}
	b.avg += (float64(n) - b.avg) * (1 - math.Exp(-float64(dt)/float64(busyWindow)))
	b.last = now
}

// value is the average.
func (b *busyness) value() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.avg
}
