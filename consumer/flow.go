package consumer

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// flow applies pause and resume decisions to the client. Decisions are made
// under each partition's mutex (the wanted state, partition.paused) by the
// poll loop when a partition fills and by lanes when it drains; flow then
// applies the latest wanted state of every partition marked dirty. Applying
// the latest state is idempotent, so racing decisions converge, and no
// client call is ever made while holding a partition's mutex.
type flow struct {
	client  *kgo.Client
	current func(partKey) *partition // the owned state of a partition now, or nil
	applyMu sync.Mutex               // serialises apply

	mu    sync.Mutex
	dirty map[*partition]struct{}
	poke  chan struct{} // cap 1: wakes the flow goroutine
}

func newFlow() *flow {
	return &flow{dirty: map[*partition]struct{}{}, poke: make(chan struct{}, 1)}
}

// markIfOver wants p paused when it holds max records or more.
func (f *flow) markIfOver(p *partition, max int) {
	p.mu.Lock()
	change := !p.fenced && !p.paused && p.queued+p.running >= max
	if change {
		p.paused = true
	}
	p.mu.Unlock()
	if change {
		f.mark(p)
	}
}

// releaseLocked is called by a lane with p.mu held after a record left the
// partition; it reports whether p should resume (at or below half the
// bound). The caller then calls mark(p) without the lock.
func releaseLocked(p *partition, max int) bool {
	if p.paused && !p.fenced && p.queued+p.running <= max/2 {
		p.paused = false
		return true
	}
	return false
}

func (f *flow) mark(p *partition) {
	f.mu.Lock()
	f.dirty[p] = struct{}{}
	f.mu.Unlock()
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// apply sends the wanted state of every dirty partition to the client.
func (f *flow) apply() {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	f.mu.Lock()
	dirty := f.dirty
	f.dirty = map[*partition]struct{}{}
	f.mu.Unlock()
	for p := range dirty {
		p.mu.Lock()
		paused, fenced := p.paused, p.fenced
		p.mu.Unlock()
		if fenced {
			continue
		}
		tp := map[string][]int32{p.key.topic: {p.key.partition}}
		if !paused {
			f.client.ResumeFetchPartitions(tp)
			continue
		}
		f.client.PauseFetchPartitions(tp)
		// A rebalance may have fenced p between the read above and the
		// pause, and resumed the partition for its next assignment: the
		// pause just applied would then be stale and could stop the
		// partition for good. Re-apply what the current owner wants.
		p.mu.Lock()
		fenced = p.fenced
		p.mu.Unlock()
		if fenced {
			if now := f.current(p.key); now == nil || !now.wantsPause() {
				f.client.ResumeFetchPartitions(tp)
			}
		}
	}
}

// wantsPause reports the wanted fetch state of p.
func (p *partition) wantsPause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && !p.fenced
}

// run applies decisions until stop is closed.
func (f *flow) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-f.poke:
			f.apply()
		}
	}
}
