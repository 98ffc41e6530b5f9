package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func recorder() (*Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return New(tp, nil), rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestSendThenProcessLinked(t *testing.T) {
	tr, rec := recorder()
	r := &kgo.Record{Topic: "chat", Key: []byte("chat-42"), Value: []byte("x")}
	_, send := tr.StartSend(context.Background(), r, "chat-42", "ev-1")
	r.Partition, r.Offset = 3, 17
	EndSend(send, r, nil)
	if NewCarrier(r).Get("traceparent") == "" {
		t.Fatal("send did not inject traceparent")
	}

	for _, asChild := range []bool{false, true} {
		ctx, span := tr.StartProcess(context.Background(), r, Process{Group: "g", SessionID: "chat-42", EventID: "ev-1", Attempt: 2, AsChild: asChild})
		if !trace.SpanFromContext(ctx).SpanContext().Equal(span.SpanContext()) {
			t.Fatal("handler context does not carry the process span")
		}
		EndProcess(span, errors.New("downstream busy"))
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	s, linked, child := spans[0], spans[1], spans[2]
	if s.SpanKind() != trace.SpanKindProducer || linked.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("kinds %v %v", s.SpanKind(), linked.SpanKind())
	}
	if len(linked.Links()) != 1 || linked.Links()[0].SpanContext.SpanID() != s.SpanContext().SpanID() {
		t.Fatalf("process span links %v, want the send span", linked.Links())
	}
	if linked.Parent().IsValid() {
		t.Error("link-only process span has a parent")
	}
	if child.Parent().SpanID() != s.SpanContext().SpanID() || child.SpanContext().TraceID() != s.SpanContext().TraceID() {
		t.Error("AsChild process span is not the send span's child")
	}
	a := attrs(linked)
	want := map[attribute.Key]string{
		"messaging.system": "kafka", "messaging.destination.name": "chat", "messaging.destination.partition.id": "3",
		"messaging.kafka.message.key": "chat-42", "messaging.consumer.group.name": "g", "messaging.operation.type": "process",
		AttrSessionID: "chat-42", AttrEventID: "ev-1",
	}
	for k, v := range want {
		if a[k].String() != v {
			t.Errorf("attribute %s = %q, want %q", k, a[k].String(), v)
		}
	}
	if a["messaging.kafka.offset"].AsInt64() != 17 || a[AttrAttempt].AsInt64() != 2 {
		t.Errorf("offset/attempt attributes: %v %v", a["messaging.kafka.offset"], a[AttrAttempt])
	}
	if linked.Status().Code != codes.Error {
		t.Error("failed attempt did not set error status")
	}
}

// A record written by another W3C-compliant producer: its traceparent is
// honoured; a malformed one is ignored without failing.
func TestForeignAndMalformedHeaders(t *testing.T) {
	tr, rec := recorder()
	foreign := &kgo.Record{Topic: "chat", Headers: []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}}
	_, span := tr.StartProcess(context.Background(), foreign, Process{})
	span.End()
	bad := &kgo.Record{Topic: "chat", Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("garbage")}}}
	_, span = tr.StartProcess(context.Background(), bad, Process{AsChild: true})
	span.End()
	spans := rec.Ended()
	if l := spans[0].Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("foreign traceparent not linked: %v", l)
	}
	if len(spans[1].Links()) != 0 || spans[1].Parent().IsValid() {
		t.Fatal("malformed traceparent produced a link or parent")
	}
}

func TestLogger(t *testing.T) {
	tr, _ := recorder()
	ctx, span := tr.StartProcess(context.Background(), &kgo.Record{Topic: "t"}, Process{})
	defer span.End()
	var buf bytes.Buffer
	l := Logger(ctx, zerolog.New(&buf), "chat-1", "ev-9")
	l.Info().Msg("hello")
	var got map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["trace_id"] != span.SpanContext().TraceID().String() || got["span_id"] != span.SpanContext().SpanID().String() ||
		got["session_id"] != "chat-1" || got["event_id"] != "ev-9" {
		t.Fatalf("log fields %v", got)
	}
	buf.Reset()
	plain := Logger(context.Background(), zerolog.New(&buf), "", "")
	plain.Info().Msg("x")
	if bytes.Contains(buf.Bytes(), []byte("trace_id")) || bytes.Contains(buf.Bytes(), []byte("session_id")) {
		t.Fatalf("empty fields written: %s", buf.Bytes())
	}
}

// BenchmarkProcessSpan: the per-attempt cost with tracing off (no-op
// provider) and on (SDK with a recorder).
func BenchmarkProcessSpan(b *testing.B) {
	src, _ := recorder()
	r := &kgo.Record{Topic: "chat", Key: []byte("chat-42")}
	_, s := src.StartSend(context.Background(), r, "chat-42", "ev")
	s.End()
	for _, bc := range []struct {
		name string
		tr   *Tracer
	}{{"noop", New(noop.NewTracerProvider(), nil)}, {"sdk", src}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_, span := bc.tr.StartProcess(context.Background(), r, Process{Group: "g", SessionID: "chat-42", Attempt: 1})
				EndProcess(span, nil)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	if New(noop.NewTracerProvider(), nil).Enabled() {
		t.Error("no-op provider reported enabled")
	}
	if tr, _ := recorder(); !tr.Enabled() {
		t.Error("SDK provider reported disabled")
	}
	if New(nil, nil).Enabled() {
		t.Error("unset global provider reported enabled")
	}
}
