package consumer

import (
	"errors"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// The breaker as the lanes meet it: waiting while it is open, reporting
// each attempt, and the watchdog's check that an open breaker can still
// probe. The breaker itself (internal/breaker) knows nothing of lanes.

// breakerIdle, run by the watchdog, lets fetching resume while the breaker
// is open with nothing to probe with (every held record ended — dead-lettered
// as permanent, fenced by a rebalance — and the partitions were paused): the
// next record fetched becomes the probe and its lane's wait holds fetching
// again. Without it such a breaker would stay open for ever.
//
// It is also where a hung probe is noticed when no lane is asking: the
// watchdog's tick gives it up as soon as it passes its limit.
func (c *Consumer) breakerIdle(now time.Time) {
	if !c.brk.OpenNow() {
		return
	}
	idle, hung := c.brk.Idle(now)
	c.probeHung(hung, now)
	if idle {
		c.brk.ReleaseIdle()
		c.flow.holdChanged()
	}
}

// probeRec is the running probe as the gate knows it: the record it runs
// on (a batch's head) and when it started, to name it if it hangs.
type probeRec struct {
	id    breaker.ProbeID
	w     *work
	start time.Time
}

// probeHung warns that probe id was given up as hung at now (nothing when
// id is 0): counted as a failed probe, the next one runs on another lane,
// its own lane still waits for the handler. The record is named when the
// gate still knows it.
func (c *Consumer) probeHung(id breaker.ProbeID, now time.Time) {
	if id == 0 {
		return
	}
	b := c.brk
	ev := c.log().Warn().Uint64("probe", uint64(id)).Stringer("timeout", c.cfg.HandlerTimeout).
		Stringer("probe_interval", b.Policy().ProbeInterval)
	if r := c.probeWork.Load(); r != nil && r.id == id {
		ev = ev.Str("topic", r.w.rec.Topic).Int32("partition", r.w.rec.Partition).Int64("offset", r.w.rec.Offset).
			Str("session", r.w.session).Stringer("running", now.Sub(r.start))
	}
	ev.Msg("circuit breaker probe given up as hung: it ran past HandlerTimeout (its handler ignores its context); " +
		"counted as a failed probe, the next probe runs on another lane, its own lane waits for the handler to return; " +
		"make the handler honour its context")
}

// breakerWait holds w's lane while the breaker is open, until it may
// attempt: as the probe (probe is its id, to pass back to breakerReport),
// or because the breaker closed. It reports whether it waited, and false
// in ok when w's partition was fenced or w got done meanwhile (no attempt
// is to be made).
func (c *Consumer) breakerWait(w *work) (probe breaker.ProbeID, waited, ok bool) {
	if !c.brk.OpenNow() {
		return 0, false, true
	}
	return c.breakerHold(w)
}

// breakerHold is breakerWait's loop while the breaker is open, in its own
// function so that the common path (breaker closed) runs no deferred call.
func (c *Consumer) breakerHold(w *work) (probe breaker.ProbeID, waited, ok bool) {
	b := c.brk
	for {
		now := time.Now()
		a := b.Allow(now)
		c.probeHung(a.Hung, now)
		if a.OK {
			if a.Probe != 0 {
				c.probeWork.Store(&probeRec{id: a.Probe, w: w, start: now})
			}
			return a.Probe, waited, true
		}
		if !waited {
			waited = true
			defer b.EndWait()
			if b.BeginWait() { // hold fetching again
				c.flow.holdChanged()
			}
		}
		if !w.p.waitFor(w.seq, a.Wait, a.Closed) {
			return 0, true, false
		}
	}
}

// breakerReport tells the breaker an attempt's outcome (of a record of
// partition p) and acts on the transition; probe is the id breakerWait
// returned (0: not a probe). It
// reports whether a failed attempt is excused: the breaker is open, so the
// failure is the outage's, not the record's, and does not count against
// its retry budget.
func (c *Consumer) breakerReport(p *partition, probe breaker.ProbeID, err error) (excused bool) {
	b := c.brk
	if b == nil {
		return false
	}
	o := breaker.Success
	switch {
	case err == nil:
	case IsPermanent(err) || p.isFenced() || errors.Is(err, errGroupSilent): // a revoke, a loss, the shutdown or a silence hold cut it short
		o = breaker.Neutral
	default:
		o = breaker.Failure
	}
	now := time.Now()
	tr, hung := b.Report(now, probe, o)
	c.probeHung(hung, now)
	if r := c.probeWork.Load(); probe != 0 && r != nil && r.id == probe {
		c.probeWork.CompareAndSwap(r, nil) // its record is not kept past its report
	}
	switch tr {
	case breaker.BecameOpen:
		st := b.Snapshot(time.Now())
		c.flow.holdChanged()
		c.log().Warn().Int("failed", st.Failures).Int("attempts", st.Calls).Stringer("window", b.Policy().Window).
			Stringer("probe_interval", b.Policy().ProbeInterval).Err(err).
			Msg("circuit breaker open: fetching paused, lanes hold their records, probing")
	case breaker.BecameClosed:
		c.flow.holdChanged()
		c.log().Info().Stringer("open_for", time.Since(b.LastOpened())).
			Msg("circuit breaker closed: a probe succeeded; fetching resumes")
	}
	if o == breaker.Failure && b.OpenNow() {
		b.Excuse()
		return true
	}
	return false
}
