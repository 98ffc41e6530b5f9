package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"
)

// process runs one record through the handler (with retries and, when
// needed, the DLQ or the park topic) and reports the outcome to its
// partition.
func (c *Consumer) process(l *lane, w *work) {
	if w.parkRetry {
		c.retryParked(l, w)
		return
	}
	if !w.p.start(w.seq) {
		return // fenced (the next owner reads it again), or skipped as stalled
	}
	if w.moves { // read during a growth: its session may wait for its old partitions
		if c.park != nil && c.skipSeen(w) {
			return // done before: no wait for it
		}
		ok, on := c.movedWait(l, w, func(x *work) { c.process(l, x) })
		if !ok {
			w.p.finish(w.seq, false) // fenced meanwhile
			return
		}
		if on >= 0 {
			w.p.finish(w.seq, c.parkMoved(w, on))
			return
		}
	}
	if c.park != nil && c.forwardParked(w) { // after a moved wait: its records parked on old partitions count too
		return
	}
	if c.parksPaused(w) && c.pausedNow(w) { // paused by an operator: out of its partition's way
		w.p.finish(w.seq, c.parkPaused(w))
		return
	}
	done, out := c.deliver(l, w)
	if out.cause != nil {
		done = c.parkOut(w, out.cause, out.attempts, out.first, out.at, "")
	}
	w.p.finish(w.seq, done)
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
func (c *Consumer) deliver(l *lane, w *work) (done bool, out parkAs) {
	m := &w.msg
	*m = Message{Record: w.rec, SessionID: w.session, EventID: eventid.FromRecord(w.rec), Group: c.cfg.Group}
	var bo backoff.BackOff // made on the first failure: most messages need none
	spent := 0             // attempts counted against the budget (not excused by the breaker)
	var failedAt time.Time // the first counted failure, for parking
	for attempt := 1; ; attempt++ {
		ps, ok := c.through(w)
		if !ok {
			return false, out // fenced, or skipped as stalled while the member's work or the breaker held it
		}
		if ps.waited {
			bo = nil // the budget by time starts again after an outage
		}
		m.Attempt = attempt
		span, err := c.call(l, w, m)
		err, again := c.judged(w.p, ps, err)
		if err == nil {
			tracing.EndProcess(span, nil)
			c.stats.processed.Add(1)
			return true, out
		}
		if w.p.isDone(w.seq) || w.p.isFenced() {
			tracing.EndProcess(span, err)
			return false, out // skipped as stalled, or given up (its next owner runs it), while this attempt ran
		}
		if again {
			c.stats.retries.Add(1)
			tracing.EndProcess(span, err)
			bo = nil
			continue // the breaker is open, or the member holds its work: the next pass waits
		}
		spent++
		parkable := c.park != nil && !IsPermanent(err)
		now := time.Now()
		if parkable && failedAt.IsZero() {
			failedAt = now
		}
		wait, reason := c.failed(err, spent, &bo)
		if parkable && (reason != "" || c.cfg.Park.shouldPark(err, spent, failedAt, now)) {
			tracing.EndProcess(span, err) // ParkPolicy.After: parked instead of dead-lettered
			return false, parkAs{cause: err, attempts: attempt, first: failedAt, at: now}
		}
		if reason != "" {
			return c.deadLetterEnd(w, err, reason, span), out
		}
		c.retrying(w, err, wait, span)
		if !w.p.waitRetry(w.seq, wait) {
			return false, out // fenced, or skipped as stalled while waiting
		}
	}
}

// failed decides what the spent-th counted failed attempt of a record,
// which returned err, leads to: the DLQ reason when it is given up ("" when
// it is not), else the wait before its next attempt. *bo is the record's
// backoff, made here on its first failure.
func (c *Consumer) failed(err error, spent int, bo *backoff.BackOff) (wait time.Duration, reason Reason) {
	reason = c.giveUp(err, spent)
	if *bo == nil {
		*bo = c.cfg.Retry.backoff()
	}
	wait = (*bo).NextBackOff()
	if reason == "" && wait == backoff.Stop && !c.cfg.Retry.Forever {
		reason = exhaustedReason(err)
	}
	return wait, reason
}

// retrying counts and reports a failed attempt of w's record, which
// returned err and is tried again after wait, and ends its span.
func (c *Consumer) retrying(w *work, err error, wait time.Duration, span trace.Span) {
	if IsPermanent(err) {
		l := c.recordLog(span, w)
		l.Error().Err(err).Msg("permanent error with no dead-letter topic: retrying")
	}
	c.stats.retries.Add(1)
	if span.IsRecording() {
		span.AddEvent(tracing.EventRetry, trace.WithAttributes(attribute.String("lanes.retry.wait", wait.String())))
	}
	tracing.EndProcess(span, err)
}

// giveUp returns the DLQ reason when err ends the retries at this attempt.
func (c *Consumer) giveUp(err error, attempt int) Reason {
	pol := c.cfg.Retry
	switch {
	case IsPermanent(err) && c.cfg.DeadLetterTopic != "":
		return permanentReason(err)
	case !pol.Forever && attempt >= pol.MaxAttempts:
		return exhaustedReason(err)
	}
	return ""
}

func exhaustedReason(err error) Reason {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	return ReasonRetriesExhausted
}
