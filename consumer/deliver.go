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
// needed, the DLQ) and reports the outcome to its partition.
func (c *Consumer) process(l *lane, w *work) {
	if w.parkRetry {
		c.retryParked(l, w)
		return
	}
	if !w.p.start(w.seq) {
		return // fenced (the next owner reads it again), or skipped as stalled
	}
	if c.park != nil && c.forwardParked(w) {
		return
	}
	w.p.finish(w.seq, c.deliver(l, w))
}

// deliver calls the handler for w until it succeeds, the retry budget is
// spent or the error is permanent (then the record goes to the DLQ), the
// partition is fenced, or the record was skipped as stalled meanwhile (then
// no further attempt is made). It reports whether the handler succeeded or
// the record was durably dead-lettered here.
func (c *Consumer) deliver(l *lane, w *work) bool {
	m := &w.msg
	*m = Message{Record: w.rec, SessionID: w.session, EventID: eventid.FromRecord(w.rec), Group: c.cfg.Group}
	var bo backoff.BackOff // made on the first failure: most messages need none
	spent := 0             // attempts counted against the budget (not excused by the breaker)
	var failedAt time.Time // the first counted failure, for parking
	var park func() bool   // with parking on: parks the record when the in-lane budget is spent (afterFailure)
	for attempt := 1; ; attempt++ {
		ps, ok := c.through(w)
		if !ok {
			return false // fenced, or skipped as stalled while the member's work or the breaker held it
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
			return true
		}
		if w.p.isDone(w.seq) || w.p.isFenced() {
			tracing.EndProcess(span, err)
			return false // skipped as stalled, or given up (its next owner runs it), while this attempt ran
		}
		if again {
			c.stats.retries.Add(1)
			tracing.EndProcess(span, err)
			bo = nil
			continue // the breaker is open, or the member holds its work: the next pass waits
		}
		spent++
		if c.park != nil && !IsPermanent(err) {
			now := time.Now()
			if failedAt.IsZero() {
				failedAt = now
			}
			if c.cfg.Park.shouldPark(err, spent, failedAt, now) {
				tracing.EndProcess(span, err)
				return c.parkOut(w, err, m.Attempt, failedAt, now, "")
			}
			park = func() bool { return c.parkOut(w, err, m.Attempt, failedAt, time.Now(), "") }
		}
		wait, dead, done := c.afterFailure(w, spent, &bo, err, span, park)
		if dead {
			return done
		}
		if !w.p.waitRetry(w.seq, wait) {
			return false // fenced, or skipped as stalled while waiting
		}
	}
}

// afterFailure decides what a counted failed attempt of w (the spent-th)
// leads to, and ends its span: the record dead-lettered (dead; done
// reports whether the broker acknowledged the copy), or a retry after wait.
// *bo is the record's backoff, made here on its first failure. With
// parking on, park is set: a record whose retry budget is spent by a
// failure that is not permanent is parked by it instead of dead-lettered
// (ParkPolicy.After).
func (c *Consumer) afterFailure(w *work, spent int, bo *backoff.BackOff, err error, span trace.Span, park func() bool) (wait time.Duration, dead, done bool) {
	pol := c.cfg.Retry
	reason := c.giveUp(err, spent)
	if *bo == nil {
		*bo = pol.backoff()
	}
	wait = (*bo).NextBackOff()
	if reason == "" && wait == backoff.Stop && !pol.Forever {
		reason = exhaustedReason(err)
	}
	if reason != "" && park != nil && !IsPermanent(err) {
		tracing.EndProcess(span, err)
		return 0, true, park()
	}
	if reason != "" {
		done = c.deadLetter(w, &w.msg, err, reason, span)
		if done && span.IsRecording() {
			span.AddEvent(tracing.EventDeadLetter, trace.WithAttributes(
				attribute.String("lanes.dlq.reason", string(reason)), attribute.String("lanes.dlq.topic", c.cfg.DeadLetterTopic)))
		}
		tracing.EndProcess(span, err)
		return 0, true, done
	}
	if IsPermanent(err) {
		l := c.recordLog(span, w)
		l.Error().Err(err).Msg("permanent error with no dead-letter topic: retrying")
	}
	c.stats.retries.Add(1)
	if span.IsRecording() {
		span.AddEvent(tracing.EventRetry, trace.WithAttributes(attribute.String("lanes.retry.wait", wait.String())))
	}
	tracing.EndProcess(span, err)
	return wait, false, false
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

// deadLetter writes w's record to the DLQ and, once the broker acknowledged
// it, marks it done. It holds the record's claim, so the stall skipper
// never writes a second copy; a record the skipper finished first is left
// alone (false). A failed write is retried for as long as the partition is
// ours: progress is never bought with data. A retriable failure is retried
// with backoff; one that is not holds the partition, reported in Stats and
// the log, and is tried again every Retry.MaxInterval, until an operator
// acts (a dead-letter copy that cannot be written, in
// https://github.com/lanesdev/lanes/blob/main/docs/consumer.md).
func (c *Consumer) deadLetter(w *work, m *Message, cause error, reason Reason, span trace.Span) bool {
	w.claim.Lock()
	defer w.claim.Unlock()
	if w.p.isDone(w.seq) {
		return false // skipped as stalled: the skipper wrote its copy
	}
	rec := c.dlq.record(w.rec, cause.Error(), reason, m.Attempt)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = c.cfg.Retry.InitialInterval
	bo.MaxInterval = c.cfg.Retry.MaxInterval
	bo.MaxElapsedTime = 0
	for {
		ctx, cancel := context.WithTimeout(w.p.attempts, c.cfg.CommitTimeout)
		err := c.dlq.write(ctx, rec)
		cancel()
		if err == nil {
			w.p.markDone(w.seq) // also clears the partition's record of failed writes
			c.stats.deadLettered(reason)
			l := c.recordLog(span, w)
			l.Warn().Int("attempts", m.Attempt).Str("reason", string(reason)).AnErr("cause", cause).Msg("record dead-lettered")
			return true
		}
		if w.p.isFenced() {
			c.dlqGivenUp(w, span, err)
			return false
		}
		wait := c.reportDLQFailure(w, span, err)
		if retriable(err) {
			wait = bo.NextBackOff()
		}
		if !w.p.waitRetry(w.seq, wait) {
			return false
		}
	}
}

// dlqGivenUp reports a failed DLQ write of w's record whose partition is
// being given up (revoked, lost, shutting down): no retry; the record is
// left undone, the shutdown names it in ErrUnfinished, and the partition's
// next owner runs it again.
func (c *Consumer) dlqGivenUp(w *work, span trace.Span, err error) {
	if errors.Is(err, context.Canceled) { // ended by the revoke or shutdown: no failure
		w.p.dlqCut(w.seq, w.rec.Offset, time.Now())
		l := c.recordLog(span, w)
		l.Info().Str("dlq", c.cfg.DeadLetterTopic).
			Msg("dead-letter write ended by the revoke or shutdown before the broker answered: the record is left undone; its next owner runs it again")
		return
	}
	c.stats.dlqFailures.Add(1)
	w.p.dlqFailure(w.seq, w.rec.Offset, err, time.Now())
	l := c.recordLog(span, w)
	l.Warn().Err(err).Str("dlq", c.cfg.DeadLetterTopic).
		Msg("dead-letter write failed while the partition is given up (revoke or shutdown): the record is left undone; its next owner runs it again")
}

// reportDLQFailure counts and reports a failed DLQ write of w's record, and
// returns the wait before the next try of a write that is not retriable.
func (c *Consumer) reportDLQFailure(w *work, span trace.Span, err error) time.Duration {
	c.stats.dlqFailures.Add(1)
	first := w.p.dlqFailure(w.seq, w.rec.Offset, err, time.Now())
	l := c.recordLog(span, w)
	switch {
	case !retriable(err) && first:
		c.stats.dlqBlocked.Add(1)
		l.Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Int("dlq_max_message_bytes", c.dlq.limit).
			Msg("dead-letter copy cannot be written (not retriable): partition held; see PartitionStats.DeadLetterError")
	case first:
		l.Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Msg("dead-letter write failed; retrying, partition held")
	default:
		l.Debug().Err(err).Msg("dead-letter write failed again")
	}
	return c.cfg.Retry.MaxInterval
}
