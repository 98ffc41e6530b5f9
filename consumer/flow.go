package consumer

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// flow applies pause and resume decisions to the client. Partitions decide
// (partition.settleLocked, on every change of what they hold) and mark
// themselves dirty when the wanted state flips; flow then applies the latest
// wanted state of every partition marked dirty. Applying
// the latest state is idempotent, so racing decisions converge, and no
// client call is ever made while holding a partition's mutex. Rebalances
// clear the pause state of the partitions they move through reset, under
// the same lock as apply, so a pause read before a revoke can never be
// applied after the revoke's reset.
//
// The circuit breaker pauses every partition at once (hold): it pauses the
// consumed topics, which franz-go tracks apart from paused partitions, so
// the two rules combine without either undoing the other — a partition
// fetches only when neither its own settle state nor the breaker holds it —
// and partitions assigned while the breaker is open start paused.
type flow struct {
	client  *kgo.Client
	topics  []string   // the consumed topics, paused while held
	applyMu sync.Mutex // serialises apply and reset
	held    bool       // the hold last applied; under applyMu

	mu    sync.Mutex
	dirty map[*partition]struct{}
	poke  chan struct{} // cap 1: wakes the flow goroutine

	// holdFn tells whether the consumed topics should be held (the
	// breaker's wantsHold); nil: never. Read at each apply.
	holdFn func() bool
	// drain hands a freed partition's stashed records to lanes
	// (Consumer.drainStash); nil: nothing is stashed. Set once.
	drain func(*partition)
}

func newFlow() *flow {
	return &flow{dirty: map[*partition]struct{}{}, poke: make(chan struct{}, 1)}
}

// mark asks for p's wanted fetch state to be applied; partitions call it
// when that state flips.
func (f *flow) mark(p *partition) {
	f.mu.Lock()
	f.dirty[p] = struct{}{}
	f.mu.Unlock()
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// wantsHold reports whether the consumed topics should be held now.
func (f *flow) wantsHold() bool { return f.holdFn != nil && f.holdFn() }

// holdChanged asks for the hold to be applied again: the breaker's state
// changed. apply reads the state itself, so racing changes converge.
func (f *flow) holdChanged() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// apply drains the stash of every dirty partition that freed up, then
// sends the wanted hold and the wanted fetch state of every dirty
// partition to the client.
func (f *flow) apply() {
	f.mu.Lock()
	dirty := f.dirty
	if len(dirty) > 0 { // none is the usual case after a poll: no allocation
		f.dirty = map[*partition]struct{}{}
	} else {
		dirty = nil // f.dirty stays in use: never read it outside f.mu
	}
	f.mu.Unlock()
	if f.drain != nil {
		for p := range dirty {
			f.drain(p) // outside applyMu: a revoke's reset need not wait for lanes
		}
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if hold := f.wantsHold(); hold != f.held {
		f.held = hold
		if hold {
			f.client.PauseFetchTopics(f.topics...)
		} else {
			f.client.ResumeFetchTopics(f.topics...)
		}
	}
	for p := range dirty {
		f.applyFetchLocked(p)
	}
}

// applyFetch sends the wanted fetch state of ps to the client. The poll
// loop calls it for the partitions its dispatch stashed into, after apply:
// a pause decided there reaches the client before the next poll even when
// the flow goroutine took them from the dirty set and is still draining
// other stashes (else each further poll would be stashed too).
func (f *flow) applyFetch(ps []*partition) {
	if len(ps) == 0 {
		return
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	for _, p := range ps {
		f.applyFetchLocked(p)
	}
}

// applyFetchLocked sends p's wanted fetch state; nothing once p is fenced
// (rebalances reset its fetch state). f.applyMu held.
func (f *flow) applyFetchLocked(p *partition) {
	paused, active := p.fetchState()
	if !active {
		return
	}
	tp := map[string][]int32{p.key.topic: {p.key.partition}}
	if paused {
		f.client.PauseFetchPartitions(tp)
	} else {
		f.client.ResumeFetchPartitions(tp)
	}
}

// reset clears the pause state of partitions a rebalance assigns, revokes or
// loses (franz-go keeps it across rebalances). Callers fence the old state
// first, so an apply that runs after reset skips it.
func (f *flow) reset(cl *kgo.Client, tps map[string][]int32) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	cl.ResumeFetchPartitions(tps)
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
