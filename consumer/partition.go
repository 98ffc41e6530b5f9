package consumer

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
)

// admit registers one fetch's records, in offset order, and calls run with
// the index and sequence number of each record to hand to a lane. drop
// holds Filter's verdicts (nil: keep all).
// Records the commit metadata lists as completed, filtered ones, and
// control records (transaction markers: no message) are done at once. A
// fenced partition admits nothing: its next owner reads the records again.
func (p *partition) admit(recs []*kgo.Record, hwm int64, drop []bool, run func(i int, seq uint64)) (filtered, prior, truncated int) {
	p.mu.Lock()
	if p.fenced {
		p.mu.Unlock()
		return 0, 0, 0
	}
	p.hwm = hwm
	if len(recs) > 0 && p.tr.NothingFetched() && recs[0].Offset < p.committed {
		// The committed offset is past the log's end: truncated since the
		// commit, and the client reset. The metadata described the old log.
		truncated++
		p.prior = offsets.Skipper{}
		p.parkTruncatedLocked(recs[0].Offset)
	}
	for i, r := range recs {
		seq, cut := p.tr.Fetched(r.Offset)
		if cut {
			truncated++
			p.prior = offsets.Skipper{} // it described the log before the truncation
			p.parkTruncatedLocked(r.Offset)
		}
		switch {
		case r.Attrs.IsControl():
			p.tr.Done(seq)
		case p.prior.Done(r.Offset):
			p.tr.Done(seq)
			prior++
		case drop != nil && drop[i]:
			p.tr.Done(seq)
			filtered++
		default:
			p.queued++
			run(i, seq)
		}
	}
	if truncated > 0 {
		p.forgetDLQLocked() // records retired by the truncation are done
	}
	p.unlock(p.settleLocked())
	return filtered, prior, truncated
}

// start moves a queued record to running. It reports false, and the record
// leaves the partition, when the partition is fenced or the record is done
// already (skipped as stalled while it waited).
func (p *partition) start(seq uint64) bool {
	p.mu.Lock()
	p.queued--
	ok := !p.fenced && !p.tr.IsDone(seq)
	if ok {
		p.running++
	}
	p.mu.Unlock() // what the partition holds did not change: nothing to settle
	return ok
}

// unstart moves a started record back to queued: its lane gave it back
// (Consumer.giveBack), and starts it again when it takes it again.
func (p *partition) unstart() {
	p.mu.Lock()
	p.running--
	p.queued++
	if p.fenced && p.running == 0 {
		close(p.drained) // it drops out at its next start
	}
	p.mu.Unlock()
}

// finish ends a running record; done says whether it is handled or durably
// dead-lettered (false: fenced before it was, the next owner runs it).
func (p *partition) finish(seq uint64, done bool) {
	p.mu.Lock()
	if done {
		p.tr.Done(seq) // also while fenced: the drain commits it
		p.forgetDLQLocked()
	}
	p.running--
	if p.fenced && p.running == 0 {
		close(p.drained)
	}
	p.unlock(p.settleLocked())
}

// markDone marks a record done once its dead-letter copy is acknowledged,
// by its lane or by the stall skipper (under the record's claim). Sleeping
// retries of the partition's records wake up (see waitRetry): a lane whose
// record was skipped as stalled learns at once.
func (p *partition) markDone(seq uint64) {
	p.mu.Lock()
	p.tr.Done(seq)
	p.forgetDLQLocked()
	close(p.marked)
	p.marked = make(chan struct{})
	p.unlock(p.settleLocked())
}

// isDone reports whether the record is done (by its lane or as stalled).
func (p *partition) isDone(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tr.IsDone(seq)
}

// isReleased reports whether the partition is owned no more (revoked or
// lost): a record finishing now is its next owner's.
func (p *partition) isReleased() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// isFenced reports whether the partition is fenced: its records not yet
// done are left to the next owner.
func (p *partition) isFenced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fenced
}

// waitRetry waits d before the next attempt at record seq. It reports
// false, early, when the partition is fenced or the record got done
// meanwhile (skipped as stalled): no further attempt is to be made.
func (p *partition) waitRetry(seq uint64, d time.Duration) bool {
	return p.waitFor(seq, d, nil, nil)
}

// waitFor is waitRetry that also returns true, early, when wake or other
// is closed or signalled (the breaker closing, a silence hold's end, a
// moved session's release or an older record of it arriving; nil: never).
func (p *partition) waitFor(seq uint64, d time.Duration, wake, other <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		p.mu.Lock()
		done, marked := p.tr.IsDone(seq), p.marked
		p.mu.Unlock()
		if done {
			return false
		}
		select {
		case <-t.C:
			return true
		case <-wake:
			return true
		case <-other:
			return true
		case <-marked:
		case <-p.fence:
			return false
		}
	}
}

// stopStarting fences the partition: nothing more starts, running work
// finishes (see drained). Idempotent.
func (p *partition) stopStarting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return
	}
	p.fenced = true
	p.stash = nil // never tracked: the next owner reads these records
	close(p.fence)
	if p.running == 0 {
		close(p.drained)
	}
}

// release ends ownership: the partition is fenced, the contexts of its
// attempts still running are cancelled (another member may own it now),
// and it is never committed again. Called by owners only (owners.go),
// under the commit lock.
func (p *partition) release() {
	p.stopStarting()
	p.cancelAttempts()
	p.mu.Lock()
	p.released = true
	p.mu.Unlock()
}

// raiseHWM records an end offset listed while the partition is paused.
func (p *partition) raiseHWM(end int64) {
	p.mu.Lock()
	p.hwm = max(p.hwm, end)
	p.mu.Unlock()
}

// commitPoint is what one commit says for one partition.
type commitPoint struct {
	offset  int64  // the watermark: the next offset to read
	meta    string // completed offsets above it (internal/offsets), then the growth and park sections
	version uint64 // the tracker version it covers
	grow    string // its growth section (growth.go)
}

// toCommit returns what to commit, or false when the partition is
// released or its last commit already says everything (metaMax 0: no
// completed offsets in the metadata); then no failed commit of it holds
// anything back, and its failure is forgotten. The offset may also move
// down: after a log truncation the watermark falls below the last commit.
func (p *partition) toCommit(metaMax int) (commitPoint, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.parkUnreadLocked() {
		return commitPoint{}, false
	}
	grow := p.growMetaLocked(cmp.Or(metaMax, DefaultMaxCommitMetadataBytes))
	if p.tr.Version() != p.committedVersion || grow != p.grow.committed {
		cp := commitPoint{offset: p.tr.Watermark(), version: p.tr.Version(), grow: grow}
		if metaMax > 0 {
			cp.meta = offsets.EncodeMetadata(cp.offset, p.tr.Completed(), metaMax-p.parkRoomLocked()-len(grow))
		}
		cp.meta = p.parkMetaLocked(cp.meta+grow, cp.offset)
		if cp.offset >= 0 && (cp.offset != p.committed || cp.meta != p.committedMeta) {
			return cp, true
		}
		p.committedVersion, p.grow.committed = cp.version, grow // the last commit already says all of it
	}
	p.commitErr = nil
	return commitPoint{}, false
}

// committedAt records a commit the broker acknowledged: an earlier failed
// commit of the partition is superseded.
func (p *partition) committedAt(cp commitPoint) {
	p.mu.Lock()
	p.committed, p.committedMeta, p.committedVersion, p.grow.committed = cp.offset, cp.meta, cp.version, cp.grow
	p.commitErr = nil
	p.mu.Unlock()
}

// resume sets the position a new assignment starts from: the group's
// committed offset, with the offsets its metadata lists as completed above
// it (prior; meta is that metadata, "" when not trusted).
func (p *partition) resume(at int64, prior []offsets.Range, meta string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.committed = at
	p.tr.SetStart(at)
	if prior != nil {
		p.prior, p.committedMeta = offsets.NewSkipper(prior), meta
	}
}

// startAt sets the position of a partition the group has no commit for
// (where the reset policy puts it), and makes it due for a commit: a
// partition that never returns a record must still hand its position on,
// or its next owner resets again and skips what was produced meanwhile.
func (p *partition) startAt(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tr.NothingFetched() && p.committed < 0 {
		p.tr.SetStart(offset)
		p.tr.Touch()
	}
}

// startOffset is where the partition starts (its watermark before any
// record), false when its start is not known.
func (p *partition) startOffset() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.tr.Watermark()
	return w, w >= 0
}

// head returns the sequence number of the record holding the watermark.
func (p *partition) head() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tr.Head()
}

// commitFailed records that a commit of the partition failed.
func (p *partition) commitFailed(err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.commitErr == nil {
		p.commitFrom = now
	}
	p.commitErr = err
}

func (p *partition) stats(now time.Time) PartitionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := PartitionStats{
		Topic: p.key.topic, Partition: p.key.partition,
		Watermark: p.tr.Watermark(), Committed: p.committed, HighWatermark: p.hwm, LastStableOffset: p.lso.Load() - 1, Lag: -1,
		Buffered: p.queued, InFlight: p.running, Pending: p.tr.Pending(), Stashed: len(p.stash),
		Paused: p.full || p.paused, Draining: p.fenced, DeadLetterBlockedAt: -1, HeldAt: -1,
	}
	if held, ok := p.tr.HeldBy(); ok {
		ps.HeldAt = held
	}
	p.stallStatsLocked(&ps, now)
	for _, f := range p.dlqFails { // the lowest offset: the one nearest the watermark
		if !f.cut && (ps.DeadLetterBlockedAt < 0 || f.offset < ps.DeadLetterBlockedAt) {
			ps.DeadLetterBlockedAt, ps.DeadLetterError, ps.DeadLetterBlockedFor = f.offset, f.err, now.Sub(f.at)
		}
	}
	if p.commitErr != nil {
		ps.CommitError, ps.CommitFailingFor = p.commitErr.Error(), now.Sub(p.commitFrom)
	}
	if p.hwm >= 0 && ps.Watermark >= 0 {
		ps.Lag = max(p.hwm-ps.Watermark, 0)
	}
	p.parkStatsLocked(&ps, now)
	return ps
}
