package consumer

import (
	"context"
	"time"
)

// The workers' end: a worker parked longer than workerLinger ends
// (retire, every half linger), and at the shutdown every worker ends once
// the run queue is empty (stop).

// workerLinger is how long a parked worker waits before it ends. Reusing a
// worker saves a goroutine start and the growth of a fresh stack to the
// handler path's depth, the main cost of a session with only a message or
// two; a parked worker belongs to no session, and all of them are gone
// shortly after the last record (see retire).
const workerLinger = 100 * time.Millisecond

// stop makes the workers end once the run queue is empty (the lanes in it
// still run: their fenced records drop out at once) and ends the parked
// ones; wg then waits for them. No lane may start afterwards.
func (set *laneSet) stop() {
	set.mu.Lock()
	set.stopping = true
	if w := int64(len(set.runq)); w > 0 {
		set.wakeLocked(w)
	}
	set.mu.Unlock()
	set.retire(0)
}

// retire ends the workers parked for longer than linger (all of them with
// 0). Called every workerLinger by retireLoop, and with 0 by stop.
//
// The workers to end are taken out of parked under the lock and told after
// it (each is then out of reach of wakeLocked): after a burst of a million
// lanes, waking them all under the lock would hold up every lane start and
// every parking worker for over a second.
func (set *laneSet) retire(linger time.Duration) {
	set.mu.Lock()
	now := time.Now()
	i := 0 // parked is in parking order: the oldest first
	for i < len(set.parked) && now.Sub(set.parked[i].since) >= linger {
		i++
	}
	gone := make([]*worker, i)
	copy(gone, set.parked[:i])
	n := copy(set.parked, set.parked[i:])
	clear(set.parked[n:])
	set.parked = set.parked[:n]
	if cap(set.parked) > 64 && n < cap(set.parked)/4 {
		set.parked = append([]*worker(nil), set.parked...) // let a burst's array go
	}
	set.mu.Unlock()
	for _, w := range gone {
		w.wake <- false
	}
}

// retireLoop retires lingering workers until ctx ends. It ticks at half
// the linger, so a worker waits 100 to 150 ms for a lane.
func (set *laneSet) retireLoop(ctx context.Context) {
	t := time.NewTicker(workerLinger / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			set.retire(workerLinger)
		}
	}
}
