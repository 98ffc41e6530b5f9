package tracing

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Logger returns l with trace_id and span_id from ctx's span (when it has a
// valid one) and session_id and event_id (when non-empty).
func Logger(ctx context.Context, l zerolog.Logger, session, eventID string) zerolog.Logger {
	c := l.With()
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c = c.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
	if session != "" {
		c = c.Str("session_id", session)
	}
	if eventID != "" {
		c = c.Str("event_id", eventID)
	}
	return c.Logger()
}
