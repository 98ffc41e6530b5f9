package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// An attempt's gates: the member's holds as the lanes meet them. Before an
// attempt its lane waits at the gate (through) while a silence hold
// (silence.go) holds the member's work or the circuit breaker
// (internal/breaker) is open, and passes as the breaker's probe when it
// is one, else takes its resource's slot and a turn; after it, the gate
// judges its outcome (judged): a failure cut by a hold, or while the
// breaker is open, counts against no budget. Neither hold knows of lanes.
// What watches the holds off the record's path is gate_watch.go.

// pass is an attempt's way through the gate: the breaker's probe it runs
// as (0: none), whether it waited for the breaker, and the member's count
// of silence holds when it began.
type pass struct {
	probe  breaker.ProbeID
	waited bool // the budget by time starts again after an outage
	holds  uint64
	turn   bool // it holds a turn (MaxConcurrency), given back by judged or endTurn
	slot   bool // it holds a slot of its record's resource (Throttle), likewise
	res    string
}

// through holds w's lane while the member's work is held or the breaker
// is open, and returns the attempt's pass. ok is false when w's partition
// was fenced or w got done meanwhile (skipped as stalled): no attempt is
// to be made.
//
// It then takes its resource's slot and a turn (admitAttempt), and goes
// back to the gate when a hold began or the breaker opened meanwhile: an
// attempt waiting for either has not started, and must not start then.
// The breaker's probe takes neither: it runs alone while the breaker holds
// the rest.
func (c *Consumer) through(w *work) (ps pass, ok bool) {
	for {
		if !c.silenceWait(w) {
			return pass{}, false
		}
		probe, waited, ok := c.breakerWait(w)
		if !ok {
			return pass{}, false
		}
		ps.probe, ps.waited = probe, ps.waited || waited
		if probe != 0 {
			break
		}
		if (c.turns != nil || w.resource != "" && c.ctl != nil) && !c.admitAttempt(w, &ps) {
			c.endTurn(ps)
			return pass{}, false // fenced, or skipped as stalled, while it waited for a slot or a turn
		}
		if (!ps.slot && !ps.turn) || c.member.gate() == nil && (c.brk == nil || !c.brk.OpenNow()) {
			break
		}
		c.endTurn(ps) // held meanwhile: to the gate again
		ps.slot, ps.turn = false, false
	}
	ps.holds = c.member.holds.Load()
	return ps, true
}

// admitAttempt takes what w's attempt needs before it starts, into ps: a slot of
// its record's resource (Throttle: its Concurrency), then a turn
// (MaxConcurrency), each only when one is needed. Both are tried at once
// first; what is not free is waited for, the slot first, first come first
// served, under one watch of w's partition. It reports false when w's
// partition is fenced or w is done (skipped as stalled) first, as a record
// queued in its lane would drop out (a revoke's drain does not wait for
// them); the caller gives back what ps holds.
func (c *Consumer) admitAttempt(w *work, ps *pass) bool {
	slotFree := true
	if w.resource != "" && c.ctl != nil {
		ps.res = w.resource
		ps.slot, slotFree = c.ctl.TrySlot(w.resource, time.Now())
	}
	if slotFree && (c.turns == nil || c.turns.sem.TryAcquire(1)) {
		ps.turn = c.turns != nil
		return true
	}
	return acquireFor(w, func(ctx context.Context) (err error) {
		if !slotFree {
			if ps.slot, err = c.ctl.Slot(ctx, w.resource, time.Now()); err != nil {
				return err
			}
		}
		if c.turns != nil {
			if err = c.turns.take(ctx); err != nil {
				return err
			}
			ps.turn = true
		}
		return nil
	})
}

// acquireFor runs acquire for w under a context that ends when w's
// partition is fenced or w is done (skipped as stalled); it reports false
// when either happened, before or as acquire returned (the caller gives
// back what it took).
func acquireFor(w *work, acquire func(context.Context) error) bool {
	ctx, cancel := context.WithCancel(w.p.attempts)
	watched := make(chan struct{})
	go func() { // owned here: ended and waited for before acquireFor returns
		defer close(watched)
		w.p.untilStale(ctx, w.seq, cancel)
	}()
	err := acquire(ctx)
	cancel()
	<-watched
	return err == nil && !w.p.isFenced() && !w.p.isDone(w.seq) // both may have happened as it got it
}

// untilStale calls stale once p is fenced or its record seq is done,
// unless ctx ends first (then it returns at once).
func (p *partition) untilStale(ctx context.Context, seq uint64, stale func()) {
	for {
		p.mu.Lock()
		done, marked := p.tr.IsDone(seq), p.marked
		p.mu.Unlock()
		if done {
			stale()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-p.fence:
			stale()
			return
		case <-marked:
		}
	}
}

// endTurn gives back the turn and the slot ps holds, once its attempt
// returned.
func (c *Consumer) endTurn(ps pass) {
	if ps.turn {
		c.turns.give()
	}
	if ps.slot {
		c.ctl.Release(ps.res)
	}
}

// judged tells the gate what the attempt that passed with ps (of a record
// of partition p) returned: err, marked as the silence hold's when a hold
// began or lasted while it ran. again reports a failure that counts
// against no budget (a hold cut it, or the breaker is open): the next
// pass waits at the gate.
func (c *Consumer) judged(p *partition, ps pass, err error) (_ error, again bool) {
	c.endTurn(ps)
	cut, err := c.silenced(err, ps.holds)
	excused := c.brk != nil && c.breakerReport(p, ps.probe, err)
	return err, cut || excused
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
		if !w.p.waitFor(w.seq, a.Wait, a.Closed, nil) {
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
	o := breakerOutcome(p, err)
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
	return c.breakerExcuse(o)
}

// breakerOutcome is what an attempt (of a record of partition p) that
// returned err tells the breaker.
func breakerOutcome(p *partition, err error) breaker.Outcome {
	switch {
	case err == nil:
		return breaker.Success
	case IsPermanent(err) || p.isFenced() || errors.Is(err, errGroupSilent): // a revoke, a loss, the shutdown or a silence hold cut it short
		return breaker.Neutral
	default:
		return breaker.Failure
	}
}

// breakerExcuse reports whether a failed attempt of outcome o is excused:
// the breaker is open, so the failure is the outage's (counted in
// BreakerStats' excused attempts), not its record's.
func (c *Consumer) breakerExcuse(o breaker.Outcome) bool {
	if o == breaker.Failure && c.brk.OpenNow() {
		c.brk.Excuse()
		return true
	}
	return false
}

// silenceWait holds w's lane while the member holds its work. It reports
// false when w's partition was fenced or w got done meanwhile (no attempt
// is to be made).
func (c *Consumer) silenceWait(w *work) bool {
	for g := c.member.gate(); g != nil; g = c.member.gate() {
		if !w.p.waitFor(w.seq, time.Minute, g.over, nil) {
			return false
		}
	}
	return true
}

// silenced reports whether the attempt that returned err failed while a
// hold began or lasted (holds0 is the count of holds when it started),
// and returns err, marked as the hold's when it did.
func (c *Consumer) silenced(err error, holds0 uint64) (bool, error) {
	if err == nil || !c.member.heldSince(holds0) {
		return false, err
	}
	return true, errors.Join(errGroupSilent, err)
}
