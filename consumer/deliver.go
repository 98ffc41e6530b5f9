package consumer

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"
)

// process runs one record through the handler (with retries and, when
// needed, the DLQ or the park topic) and reports the outcome to its
// partition. It reports back when it gave the record back to its lane
// instead (giveBack), to be admitted by the control gate again: its
// session, moved by a growth of its topic, waited, and the gate may hold
// it, or an older record of it that arrived meanwhile.
func (c *Consumer) process(l *lane, w *work) (back bool) {
	if w.parkRetry {
		c.retryParked(l, w)
		return false
	}
	c.retaken(w)
	if !w.p.start(w.seq) {
		return false // fenced (the next owner reads it again), or skipped as stalled
	}
	waited := false
	if w.moves { // read during a growth: its session may wait for its old partitions
		if c.park != nil && c.skipSeen(w) {
			return false // done before: no wait for it
		}
		if wt := c.movedHold(w); wt != nil {
			ok, back, on := c.waitMoved(l, w, wt, func(x *work) bool { return c.process(l, x) })
			switch {
			case back: // an older record the gate may hold is ahead of it
				c.giveBack(l, []*work{w})
				return true
			case !ok:
				w.p.finish(w.seq, false) // fenced meanwhile
				return false
			case on >= 0:
				w.p.finish(w.seq, c.parkMoved(w, on))
				return false
			}
			waited = true
		}
	}
	if c.park != nil && c.forwardParked(w) { // after a moved wait: its records parked on old partitions count too
		return false
	}
	if c.parksPaused(w) && c.pausedNow(w) { // paused by an operator: out of its partition's way
		w.p.finish(w.seq, c.parkPaused(w))
		return false
	}
	if waited && !c.freeNow(w) { // its session may have been paused or limited while it waited: the gate asks again
		w.moves = false // released: it waits no more
		c.giveBack(l, []*work{w})
		return true
	}
	done, out := c.deliver(l, w)
	if out.cause != nil {
		done = c.parkOut(w, out.cause, out.attempts, out.first, out.at, "")
	}
	c.finish(w, done) // with transactions, its outputs first (tx.go)
	return false
}

// parkAs is a record deliver leaves to be parked (cause is nil when it
// does not): the error that ended its last attempt, its attempts, when the
// first counted one failed and when it was given up to the park topic.
type parkAs struct {
	cause     error
	attempts  int
	first, at time.Time
}

// deliver calls the handler for w until it succeeds, the retry budget is
// spent or the error is permanent (then the record goes to the DLQ), the
// partition is fenced, or the record was skipped as stalled meanwhile (then
// no further attempt is made). It reports whether the handler succeeded or
// the record was durably dead-lettered here; with parking on, a record
// whose failures call for it (ParkPolicy) is returned in out instead, for
// the caller to park.
//
// Each attempt passes the gate (gate.go: the member's holds, the breaker,
// a resource's slot, a turn), calls the handler (call.go), is judged by the
// gate, and its failure is given a verdict (outcome.go) that this loop acts
// on; the attempt's span ends here, once.
func (c *Consumer) deliver(l *lane, w *work) (done bool, out parkAs) {
	m := &w.msg
	*m = Message{Record: w.rec, SessionID: w.session, EventID: eventid.FromRecord(w.rec), Group: c.cfg.Group}
	if c.tx != nil {
		m.out = c.tx.refusals.outputsFor(w.rec) // Message.Output's (tx_finish.go)
	}
	var t tries
	for attempt := 1; ; attempt++ {
		ps, ok := c.through(w)
		if !ok {
			return false, out // fenced, or skipped as stalled while the member's work or the breaker held it
		}
		if ps.waited {
			t.bo = nil // the budget by time starts again after an outage
		}
		m.Attempt = attempt
		if m.out != nil {
			m.out.recs = m.out.recs[:0] // an attempt's outputs are its own
		}
		span, err := c.call(l, w, m)
		if m.out != nil {
			m.out.span = span.SpanContext() // the trace context of its outputs, or its dead-letter copy
			err = m.out.judgeRefused(err)   // an output of its refused for ever: a permanent failure
		}
		err, again := c.judged(w.p, ps, err)
		v := verdict{step: stepDone}
		switch {
		case err == nil:
			c.stats.processed.Add(1)
		case w.p.isDone(w.seq) || w.p.isFenced():
			v.step = stepStale // skipped as stalled, or given up (its next owner runs it), while this attempt ran
		case again:
			v.step = stepAgain // the breaker is open, or the member holds its work: the next pass waits
			c.stats.retries.Add(1)
			t.bo = nil
		default:
			now := time.Now()
			if v = c.next(&t, err, now); v.step == stepPark { // ParkPolicy: parked instead of dead-lettered
				out = parkAs{cause: err, attempts: attempt, first: t.failedAt, at: now}
			}
		}
		switch v.step {
		case stepRetry:
			c.retrying(w, err, v, span)
		case stepDead:
			done = c.deadLetterTraced(w, err, v.reason, span)
		}
		tracing.EndProcess(span, err)
		switch v.step {
		case stepDone:
			return true, out
		case stepRetry:
			if !w.p.waitRetry(w.seq, v.wait) {
				return false, out // fenced, or skipped as stalled while waiting
			}
		case stepStale, stepDead, stepPark:
			return done, out
		}
	}
}

// retrying counts and reports a failed attempt of w's record, which
// returned err and is tried again as v says, in the attempt's span.
func (c *Consumer) retrying(w *work, err error, v verdict, span trace.Span) {
	if v.perm {
		l := c.recordLog(span, w)
		l.Error().Err(err).Msg("permanent error with no dead-letter topic: retrying")
	}
	c.stats.retries.Add(1)
	if span.IsRecording() {
		span.AddEvent(tracing.EventRetry, trace.WithAttributes(attribute.String("lanes.retry.wait", v.wait.String())))
	}
}
