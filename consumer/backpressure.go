package consumer

import "github.com/twmb/franz-go/pkg/kgo"

// Backpressure: the rules that bound what a partition holds in memory.
//
// A partition is full once the records it holds (tracked: queued, running,
// or done above an unfinished one) reach max, and stays full until they
// fall to max/2. A full partition hands no record to lanes: records fetched
// meanwhile wait in its stash, in offset order, untracked. Fetching goes on
// until the stash holds max/2 records, then pauses, and resumes once the
// stash is empty and the partition is no longer full. Keeping what was
// fetched matters: franz-go drops the buffered records of a paused
// partition, which would then be fetched and decoded again while the lanes
// sit idle.
//
// While a stash exists every new record of the partition joins it, so
// records reach lanes in offset order; admitMu serialises the fetch path
// and the stash's drain (Consumer.drainStash, run by the flow controller
// when a full partition frees up). A fenced partition drops its stash: those
// offsets were never tracked or committed, and the next owner reads them.
//
// At most max + one poll (tracked: a poll admitted just below max) and
// max/2 + one poll (stashed: a poll stashed just below max/2) records of a
// partition are in memory, plus franz-go's own fetch buffer.

// settleLocked applies the rules after any change of what p holds. It
// reports whether the flow controller must be told: the wanted fetch state
// flipped, or the partition freed up with records stashed. p.mu held.
func (p *partition) settleLocked() bool {
	held := p.tr.Pending()
	freed := false
	switch {
	case !p.full && held >= p.max:
		p.full = true
	case p.full && held <= p.max/2:
		p.full, freed = false, true
	}
	return p.settleFetchLocked() || (freed && len(p.stash) > 0 && !p.fenced)
}

// settleFetchLocked sets the wanted fetch state from the stash and reports
// whether it flipped. p.mu held.
func (p *partition) settleFetchLocked() bool {
	want := p.paused
	switch {
	case len(p.stash) >= max(p.max/2, 1):
		want = true
	case len(p.stash) == 0 && !p.full:
		want = false
	}
	flipped := want != p.paused
	p.paused = want
	return flipped
}

// hold keeps a fetch's records out of the lanes when p is full, has a
// stash, or waits for its parked set (they join the stash), or when p is
// fenced (they are dropped: its next owner reads them). It reports false when the records are to be admitted
// now. p.admitMu held.
func (p *partition) hold(recs []*kgo.Record, hwm int64) bool {
	p.mu.Lock()
	if p.fenced {
		p.mu.Unlock()
		return true
	}
	if !p.full && len(p.stash) == 0 && !p.parkHeldLocked() {
		p.mu.Unlock()
		return false
	}
	p.hwm = max(p.hwm, hwm)
	p.stash = append(p.stash, recs...)
	p.unlock(p.settleFetchLocked())
	return true
}

// unstash takes up to n stashed records, oldest first, to admit, with the
// end offset last fetched; none while p is full or fenced. p.admitMu held.
func (p *partition) unstash(n int) ([]*kgo.Record, int64) {
	p.mu.Lock()
	if p.full || p.fenced || len(p.stash) == 0 || p.parkHeldLocked() {
		p.mu.Unlock()
		return nil, 0
	}
	n = min(n, len(p.stash))
	recs := p.stash[:n:n]
	p.stash = p.stash[n:]
	if len(p.stash) == 0 {
		p.stash = nil // let the backing array go
	}
	hwm := p.hwm
	p.unlock(p.settleFetchLocked())
	return recs, hwm
}

// fetchState is the fetch state the flow controller should apply; active is
// false once the partition is fenced (rebalances reset its fetch state).
func (p *partition) fetchState() (paused, active bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused, !p.fenced
}
