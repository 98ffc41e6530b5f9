package consumer

import (
	"time"

	"github.com/lanesdev/lanes/consumer/internal/hold"
)

// The stall clock. A partition is stalled when the record holding its
// watermark has held it for StallTimeout, not counting the time during
// which this member's work was held as a whole: a silence hold
// (silence.go: running attempts cut, none started) or an open circuit
// breaker (internal/breaker: fetching paused, lanes hold their records, one
// probe at a time). Then no record moves on for a reason of its own, so
// held time is not stalled time: nothing is reported stalled, and nothing
// skipped as stalled, while a hold is in force, and the record's clock
// goes on after it from where it stood when the hold began.
//
// The clock pauses rather than starting again: a record that held its
// partition for most of StallTimeout before a hold is reported that much
// sooner after it, and a handler that never returns is still reported
// when holds come and go faster than StallTimeout (a flapping
// coordinator). The hold is the member's, not the record's: a handler
// that ignores its context and hangs through a hold is reported stalled
// that much later (the slow-handler watch reports it meanwhile), as an
// open breaker already kept SkipStalled from skipping anything.

// stallCheck samples the watermark for the stall watch at now, hr being
// the hold clock then. The clock starts again when the watermark moves,
// when nothing is pending, and while the partition is fenced. While a
// hold is in force nothing is stalled.
func (p *partition) stallCheck(now time.Time, timeout time.Duration, hr hold.Reading) stallSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	sc := &p.stall
	wm := p.tr.Watermark()
	offset, pending := p.tr.HeldBy()
	head, _ := p.tr.Head()
	if wm != sc.lastWM || !pending || p.fenced || p.movedHeadLocked(head) { // a moved session's wait is no stall
		*sc = stallClock{lastWM: wm, movedAt: now, countAt: now, heldBase: hr.Total, sampled: now, held: hr.On != 0}
		return stallSample{}
	}
	if p.stallAgain.Swap(false) || p.isAsleep(head) { // a paused or throttled session's wait is no stall: the watermark's age goes on
		p.restartStallLocked(now, hr)
		return stallSample{}
	}
	sc.counted = max(now.Sub(sc.countAt)-(hr.Total-sc.heldBase), 0)
	sc.sampled, sc.held = now, hr.On != 0
	s := stallSample{offset: offset, seq: head, counted: sc.counted, since: sc.movedAt}
	if sc.held {
		return s // a hold is not a stall
	}
	s.fresh = !sc.stalled && sc.counted >= timeout
	sc.stalled = sc.stalled || s.fresh
	s.stalled = sc.stalled
	return s
}

// restartStallLocked starts p's stall clock again at now (its holder
// waits at an operator's word: a paused or throttled session), keeping the
// watermark's age. p.mu held.
func (p *partition) restartStallLocked(now time.Time, hr hold.Reading) {
	sc := &p.stall
	sc.countAt, sc.heldBase, sc.counted, sc.stalled = now, hr.Total, 0, false
	sc.sampled, sc.held = now, hr.On != 0
}

// restartStall is restartStallLocked for the stall watch, which found the
// record holding p queued in a sleeping lane.
func (p *partition) restartStall(now time.Time, hr hold.Reading) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restartStallLocked(now, hr)
}

// stallStatsLocked fills in ps's stall fields from the last sample: the
// watermark's age, the stall clock (moving on from the sample unless a
// hold was in force then), and whether it is stalled. ps's Watermark and
// Pending are set. p.mu held.
func (p *partition) stallStatsLocked(ps *PartitionStats, now time.Time) {
	sc := &p.stall
	if ps.Pending == 0 || sc.lastWM != ps.Watermark {
		return // moved since the last check: nothing has held it long
	}
	ps.WatermarkAge = now.Sub(sc.movedAt)
	ps.StalledFor = sc.counted
	if !sc.held {
		ps.StalledFor += max(now.Sub(sc.sampled), 0)
	}
	ps.Stalled = sc.stalled && !sc.held
}

// sleep marks record seq as waiting at the head of a sleeping lane (its
// session paused or rate-held), or no longer (on false): the stall clock
// starts again while it sleeps, so a record resumed after a long pause has
// its whole StallTimeout.
func (p *partition) sleep(seq uint64, on bool) {
	p.asleepMu.Lock()
	defer p.asleepMu.Unlock()
	if on {
		if p.asleep == nil {
			p.asleep = map[uint64]struct{}{}
		}
		p.asleep[seq] = struct{}{}
		return
	}
	delete(p.asleep, seq)
}

// isAsleep reports whether record seq waits at the head of a sleeping lane.
func (p *partition) isAsleep(seq uint64) bool {
	p.asleepMu.Lock()
	defer p.asleepMu.Unlock()
	_, ok := p.asleep[seq]
	return ok
}
