package consumer

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Calling the handler: one attempt under HandlerTimeout, inside its span
// (call), and the log lines about one record (recordLog). A record's lane
// (deliver.go), a batch (batch.go) and a parked retry (park_retry.go) all
// call through here.

// call runs one handler attempt under HandlerTimeout, inside its process
// span, turning a panic into an error. The watchdog reports an attempt that
// outlives its timeout. The caller ends the returned span.
func (c *Consumer) call(l *lane, w *work, m *Message) (span trace.Span, err error) {
	start := stampNow()
	actx := c.attemptOn(l, w, m.Attempt, start)
	var ctx context.Context = actx
	span = noSpan
	if c.tracer.Enabled() {
		ctx, span = c.tracer.StartProcess(actx, w.rec, tracing.Process{Group: c.cfg.Group, SessionID: w.session,
			EventID: m.EventID, Attempt: m.Attempt, AsChild: c.cfg.TraceAsChild})
	}
	l.begin(w, m.Attempt, start, span)
	defer func() {
		l.end()
		actx.release()
		c.metrics.handlerDone(ctx, start)
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

// attemptOn is the context of the attempt-th attempt of w's record, which
// starts at start (a stamp), made l's running attempt (track): the
// record's own for its first attempt (no allocation), a new one for a
// retry.
func (c *Consumer) attemptOn(l *lane, w *work, attempt int, start int64) *attemptCtx {
	var actx *attemptCtx
	if attempt == 1 {
		actx = &w.first
		actx.init(w.p.attempts, start, c.cfg.HandlerTimeout)
	} else {
		actx = newAttemptCtx(w.p.attempts, start, c.cfg.HandlerTimeout)
	}
	c.track(l, actx)
	return actx
}

// track makes actx the lane's running attempt, for holdWork (gate.go), and cancels
// it at once when a hold began before it was seen there.
func (c *Consumer) track(l *lane, actx *attemptCtx) {
	l.actx.Store(actx)
	if c.member.gate() != nil {
		actx.cancel(context.Canceled)
	}
}

// noSpan is the non-recording span used when tracing is disabled.
var noSpan = trace.SpanFromContext(context.Background())

// recordLog is the logger for lines about one record: topic, partition,
// offset, and (tracing.Logger) session_id, event_id, trace_id and span_id.
func (c *Consumer) recordLog(span trace.Span, w *work) zerolog.Logger {
	l := c.log().With().Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).Int64("offset", w.rec.Offset).Logger()
	return tracing.Logger(trace.ContextWithSpan(context.Background(), span), l, w.session, w.msg.EventID)
}
