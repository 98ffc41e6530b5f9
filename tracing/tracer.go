package tracing

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of lanes' spans and metrics.
const ScopeName = "github.com/lanesdev/lanes"

// Attribute keys lanes adds to the messaging conventions.
const (
	AttrSessionID = attribute.Key("lanes.session.id")
	AttrEventID   = attribute.Key("lanes.event.id")
	AttrAttempt   = attribute.Key("lanes.attempt")
)

// Event names recorded on process spans.
const (
	EventRetry      = "lanes.retry"       // the attempt failed and will be retried (attribute lanes.retry.wait)
	EventDeadLetter = "lanes.dead_letter" // the record was written to the DLQ (attributes lanes.dlq.reason, lanes.dlq.topic)
	EventStallSkip  = "lanes.stall_skip"  // the record held its partition past StallTimeout and was skipped
)

// Tracer creates lanes' spans. The zero value is not usable; use New.
type Tracer struct {
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	enabled bool
}

// New returns a Tracer over tp and prop. A nil tp means the global
// provider (otel.GetTracerProvider: a no-op until the application sets
// one); a nil prop means W3C trace context (traceparent, tracestate).
func New(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	t := &Tracer{tracer: tp.Tracer(ScopeName), prop: prop}
	_, probe := t.tracer.Start(context.Background(), "lanes.probe")
	t.enabled = probe.SpanContext().IsValid() // no-op providers give invalid span contexts
	return t
}

// Enabled reports whether the provider given to New (or the global one at
// that time) creates real spans. When it does not, callers skip tracing
// altogether and pay nothing per message; a global provider set after New
// is not seen.
func (t *Tracer) Enabled() bool { return t.enabled }

// Propagator returns the propagator the tracer injects and extracts with.
func (t *Tracer) Propagator() propagation.TextMapPropagator { return t.prop }

// StartSend starts the PRODUCER span "send <topic>" for r, a child of ctx,
// and injects its context into r's headers. End the span when the broker
// acknowledges (or rejects) the record.
func (t *Tracer) StartSend(ctx context.Context, r *kgo.Record, session, eventID string) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, "send "+r.Topic, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.String("messaging.kafka.message.key", session),
		AttrSessionID.String(session),
		AttrEventID.String(eventID),
	)
	t.prop.Inject(ctx, NewCarrier(r))
	return ctx, span
}

// EndSend ends a send span with the record's partition and offset, or the
// error.
func EndSend(span trace.Span, r *kgo.Record, err error) {
	if span.IsRecording() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(
				attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition))),
				attribute.Int64("messaging.kafka.offset", r.Offset),
			)
		}
	}
	span.End()
}

// Process describes one handler attempt.
type Process struct {
	Group     string
	SessionID string
	EventID   string
	Attempt   int
	// AsChild makes the process span a child of the producer's span (from
	// the record's headers) as well as linking to it. Default: link only,
	// so each consumer trace starts its own root, as the messaging
	// conventions recommend for asynchronous hops.
	AsChild bool
}

// StartProcess starts the CONSUMER span "process <topic>" for one handler
// attempt of r. The span links to the context found in r's headers
// (malformed or missing headers give no link and no error). The returned
// context carries the span, so the handler's own calls join the trace.
func (t *Tracer) StartProcess(ctx context.Context, r *kgo.Record, p Process) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	var remote trace.SpanContext
	if p.AsChild {
		pctx := t.prop.Extract(ctx, NewCarrier(r))
		if remote = trace.SpanContextFromContext(pctx); remote.IsValid() {
			ctx = pctx
		}
	}
	ctx, span := t.tracer.Start(ctx, "process "+r.Topic, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	if !p.AsChild {
		remote = trace.SpanContextFromContext(t.prop.Extract(context.Background(), NewCarrier(r)))
	}
	if remote.IsValid() {
		span.AddLink(trace.Link{SpanContext: remote})
	}
	span.SetAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition))),
		attribute.Int64("messaging.kafka.offset", r.Offset),
		attribute.String("messaging.kafka.message.key", string(r.Key)),
		attribute.String("messaging.consumer.group.name", p.Group),
		AttrSessionID.String(p.SessionID),
		AttrEventID.String(p.EventID),
		AttrAttempt.Int(p.Attempt),
	)
	return ctx, span
}

// EndProcess ends a process span, marking it failed when err is non-nil.
func EndProcess(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
