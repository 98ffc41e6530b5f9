package control

import (
	"container/heap"
	"sync"
	"time"
)

// Alarms calls functions at their times, from the goroutine that runs Run:
// the wakes of rate-limited lanes, so that a lane that waits holds no
// goroutine of its own.
type Alarms struct {
	mu   sync.Mutex
	h    alarmHeap
	seq  uint64
	kick chan struct{} // cap 1: an earlier alarm was set
}

type alarm struct {
	at  time.Time
	seq uint64 // ties in setting order
	fn  func()
}

type alarmHeap []alarm

func (h alarmHeap) Len() int { return len(h) }
func (h alarmHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h alarmHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *alarmHeap) Push(x any)   { *h = append(*h, x.(alarm)) }
func (h *alarmHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = alarm{}
	*h = old[:len(old)-1]
	return a
}

// NewAlarms returns alarms with none set.
func NewAlarms() *Alarms { return &Alarms{kick: make(chan struct{}, 1)} }

// At sets fn to be called at t (at once by Run when t has passed).
func (a *Alarms) At(t time.Time, fn func()) {
	a.mu.Lock()
	a.seq++
	heap.Push(&a.h, alarm{at: t, seq: a.seq, fn: fn})
	first := a.h[0].seq == a.seq
	a.mu.Unlock()
	if first {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// Len is the number of alarms set and not yet called.
func (a *Alarms) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.h.Len()
}

// Run calls each alarm once its time comes, in time order, until done is
// closed; the alarms left are then dropped (their waiters end with the
// consumer).
func (a *Alarms) Run(done <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		for _, fn := range a.due(time.Now()) {
			fn()
		}
		t.Reset(a.next(time.Now()))
		select {
		case <-done:
			a.mu.Lock()
			a.h = nil
			a.mu.Unlock()
			return
		case <-a.kick:
		case <-t.C:
		}
	}
}

// due pops the alarms whose time is not after now.
func (a *Alarms) due(now time.Time) []func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []func()
	for a.h.Len() > 0 && !a.h[0].at.After(now) {
		out = append(out, heap.Pop(&a.h).(alarm).fn)
	}
	return out
}

// next is how long until the first alarm (an hour with none).
func (a *Alarms) next(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h.Len() == 0 {
		return time.Hour
	}
	return max(a.h[0].at.Sub(now), 0)
}
