package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ErrHandlerPanic is wrapped by the error a recovered handler panic becomes.
var ErrHandlerPanic = errors.New("consumer: handler panicked")

// deliver calls the handler for w until it succeeds, the retry budget is
// spent or the error is permanent (then the record goes to the DLQ), the
// partition is fenced, or the record was skipped as stalled meanwhile (then
// no further attempt is made). It reports whether the handler succeeded or
// the record was durably dead-lettered here.
func (c *Consumer) deliver(l *lane, w *work) bool {
	m := &w.msg
	*m = Message{Record: w.rec, SessionID: w.session, EventID: eventid.FromRecord(w.rec)}
	pol := c.cfg.Retry
	var bo backoff.BackOff // made on the first failure: most messages need none
	for attempt := 1; ; attempt++ {
		m.Attempt = attempt
		span, err := c.call(l, w, m)
		if err == nil {
			tracing.EndProcess(span, nil)
			c.stats.processed.Add(1)
			return true
		}
		if w.p.isDone(w.seq) {
			tracing.EndProcess(span, err)
			return false // skipped as stalled while this attempt ran
		}
		reason := c.giveUp(err, attempt)
		if bo == nil {
			bo = pol.backoff()
		}
		wait := bo.NextBackOff()
		if reason == "" && wait == backoff.Stop && !pol.Forever {
			reason = exhaustedReason(err)
		}
		if reason != "" {
			done := c.deadLetter(w, m, err, reason, span)
			if done && span.IsRecording() {
				span.AddEvent(tracing.EventDeadLetter, trace.WithAttributes(
					attribute.String("lanes.dlq.reason", reason), attribute.String("lanes.dlq.topic", c.cfg.DeadLetterTopic)))
			}
			tracing.EndProcess(span, err)
			return done
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
		if !w.p.waitRetry(w.seq, wait) {
			return false // fenced, or skipped as stalled while waiting
		}
	}
}

// giveUp returns the DLQ reason when err ends the retries at this attempt.
func (c *Consumer) giveUp(err error, attempt int) string {
	pol := c.cfg.Retry
	switch {
	case IsPermanent(err) && c.cfg.DeadLetterTopic != "":
		return ReasonPermanent
	case !pol.Forever && attempt >= pol.MaxAttempts:
		return exhaustedReason(err)
	}
	return ""
}

func exhaustedReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	return ReasonRetriesExhausted
}

// call runs one handler attempt under HandlerTimeout, inside its process
// span, turning a panic into an error. The watchdog reports an attempt that
// outlives its timeout. The caller ends the returned span.
func (c *Consumer) call(l *lane, w *work, m *Message) (span trace.Span, err error) {
	now := time.Now()
	var actx *attemptCtx
	if m.Attempt == 1 {
		actx = &w.first
		actx.init(c.workCtx, now, c.cfg.HandlerTimeout)
	} else {
		actx = newAttemptCtx(c.workCtx, now, c.cfg.HandlerTimeout)
	}
	var ctx context.Context = actx
	span = noSpan
	if c.tracer.Enabled() {
		ctx, span = c.tracer.StartProcess(actx, w.rec, tracing.Process{Group: c.cfg.Group, SessionID: w.session,
			EventID: m.EventID, Attempt: m.Attempt, AsChild: c.cfg.TraceAsChild})
	}
	l.begin(w, m.Attempt, now, span)
	defer func() {
		l.end()
		actx.release()
		c.metrics.handlerDone(ctx, time.Since(now))
		if r := recover(); r != nil {
			c.stats.panics.Add(1)
			l := c.recordLog(span, w)
			l.Error().Int("attempt", m.Attempt).Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).
				Msg("handler panicked; treated as an error")
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return span, c.h.Handle(ctx, m)
}

// noSpan is the non-recording span used when tracing is disabled.
var noSpan = trace.SpanFromContext(context.Background())

// recordLog is the logger for lines about one record: topic, partition,
// offset, and (tracing.Logger) session_id, event_id, trace_id and span_id.
func (c *Consumer) recordLog(span trace.Span, w *work) zerolog.Logger {
	l := c.log().With().Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).Int64("offset", w.rec.Offset).Logger()
	return tracing.Logger(trace.ContextWithSpan(context.Background(), span), l, w.session, w.msg.EventID)
}
