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
	client  *kgo.Client // under applyMu once Run started (setClient)
	topics  []string    // the consumed topics, paused while held
	applyMu sync.Mutex  // serialises apply and reset
	held    bool        // the hold last applied; under applyMu

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

// apply sends the wanted hold and the wanted fetch state of every dirty
// partition to the client, then drains the stash of every dirty partition
// that freed up. The dirty set is taken under applyMu, so an apply that
// returns has sent every state marked before it began, also when another
// apply took the set (the poll loop's apply waits for the flow goroutine's
// and a pause decided in a dispatch reaches the client before the next
// poll). The drains run after applyMu is released: a revoke's reset need
// not wait for lanes; the states they change are marked and sent by the
// next apply.
func (f *flow) apply() {
	f.applyMu.Lock()
	f.mu.Lock()
	dirty := f.dirty
	if len(dirty) > 0 { // none is the usual case after a poll: no allocation
		f.dirty = map[*partition]struct{}{}
	} else {
		dirty = nil // f.dirty stays in use: never read it outside f.mu
	}
	f.mu.Unlock()
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
	f.applyMu.Unlock()
	if f.drain != nil {
		for p := range dirty {
			f.drain(p)
		}
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

// setClient makes cl the client apply and reset talk to: a transactional
// member fenced joins again with a new one (tx_rejoin.go). What the old
// client paused is gone with it: the partitions a new assignment brings
// start unpaused and are marked again as they fill, and the breaker's
// hold is applied again at once.
func (f *flow) setClient(cl *kgo.Client) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	f.client, f.held = cl, false
	f.holdChanged() // a hold in force pauses the new client's topics too
}
