package consumer

import "time"

// The breaker as the lanes meet it: waiting while it is open, reporting
// each attempt, and the watchdog's check that an open breaker can still
// probe. The breaker itself (breaker.go) knows nothing of lanes.

// breakerIdle, run by the watchdog, lets fetching resume while the breaker
// is open with nothing to probe with (every held record ended — dead-lettered
// as permanent, fenced by a rebalance — and the partitions were paused): the
// next record fetched becomes the probe and its lane's wait holds fetching
// again. Without it such a breaker would stay open for ever.
func (c *Consumer) breakerIdle(now time.Time) {
	if c.brk.openNow() && c.brk.idle(now) {
		c.brk.idleReleased.Store(true)
		c.flow.holdChanged()
	}
}

// breakerWait holds w's lane while the breaker is open, until it may
// attempt: as the probe, or because the breaker closed. It reports whether
// it waited, and false in ok when w's partition was fenced or w got done
// meanwhile (no attempt is to be made).
func (c *Consumer) breakerWait(w *work) (probe, waited, ok bool) {
	b := c.brk
	if !b.openNow() {
		return false, false, true
	}
	for {
		probe, ok, wait, closedCh := b.allow(time.Now())
		if ok {
			return probe, waited, true
		}
		if !waited {
			waited = true
			b.waiters.Add(1)
			defer b.waiters.Add(-1)
			if b.idleReleased.Swap(false) { // hold fetching again
				c.flow.holdChanged()
			}
		}
		if !w.p.waitFor(w.seq, wait, closedCh) {
			return false, true, false
		}
	}
}

// breakerReport tells the breaker an attempt's outcome (of a record of
// partition p) and acts on the transition. It reports whether a failed attempt is excused: the breaker
// is open, so the failure is the outage's, not the record's, and does not
// count against its retry budget.
func (c *Consumer) breakerReport(p *partition, probe bool, err error) (excused bool) {
	b := c.brk
	if b == nil {
		return false
	}
	o := success
	switch {
	case err == nil:
	case IsPermanent(err) || p.isFenced(): // a revoke, a loss or the shutdown cut it short
		o = neutral
	default:
		o = failure
	}
	switch b.report(time.Now(), probe, o) {
	case becameOpen:
		st := b.snapshot(time.Now())
		c.flow.holdChanged()
		c.log().Warn().Int("failed", st.Failures).Int("attempts", st.Calls).Dur("window", b.pol.Window).
			Dur("probe_interval", b.pol.ProbeInterval).Err(err).
			Msg("circuit breaker open: fetching paused, lanes hold their records, probing")
	case becameClosed:
		c.flow.holdChanged()
		c.log().Info().Dur("open_for", time.Since(b.lastOpened())).
			Msg("circuit breaker closed: a probe succeeded; fetching resumes")
	}
	if o == failure && b.openNow() {
		b.excused.Add(1)
		return true
	}
	return false
}
