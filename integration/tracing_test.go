package integration

import (
	"context"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
	"github.com/lanesdev/lanes/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceAcrossTheHop: a message sent with the lanes producer and handled
// by the lanes consumer yields a send span (PRODUCER) and a process span
// (CONSUMER) that links to it, and the handler's context carries the
// process span.
func TestTraceAcrossTheHop(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	rec := tracetest.NewSpanRecorder()
	ended := make(chan struct{}, 1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(endSignal{rec, ended}))
	p, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(context.Background(), "chat-1", []byte("book a flight to London")); err != nil {
		t.Fatal(err)
	}
	handled := make(chan trace.SpanContext, 1)
	cfg := c.consumerConfig("trace", topic, dlq)
	cfg.TracerProvider = tp
	startMember(t, "m1", cfg, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		handled <- trace.SpanContextFromContext(ctx)
		return nil
	}))
	var inHandler trace.SpanContext
	select {
	case inHandler = <-handled:
	case <-time.After(time.Minute):
		t.Fatal("message not handled")
	}
	var send, process sdktrace.ReadOnlySpan
	timeout := time.After(time.Minute)
	for process == nil {
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindProducer:
				send = s
			case trace.SpanKindConsumer:
				process = s
			}
		}
		if process != nil {
			break
		}
		select { // the process span ends just after the handler returns
		case <-ended:
		case <-timeout:
			t.Fatal("the process span never ended")
		}
	}
	if send == nil || process == nil {
		t.Fatalf("spans: send %v, process %v", send, process)
	}
	if l := process.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != send.SpanContext().TraceID() ||
		l[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("process span links %v, want the send span %v", l, send.SpanContext())
	}
	if !inHandler.Equal(process.SpanContext()) {
		t.Fatal("handler context does not carry the process span")
	}
	for _, kv := range process.Attributes() {
		if kv.Key == tracing.AttrSessionID && kv.Value.AsString() != "chat-1" {
			t.Fatalf("session attribute %q", kv.Value.AsString())
		}
	}
}

// endSignal is a span processor that signals each span's end after
// handing it to the recorder.
type endSignal struct {
	*tracetest.SpanRecorder
	ended chan struct{}
}

func (e endSignal) OnEnd(s sdktrace.ReadOnlySpan) {
	e.SpanRecorder.OnEnd(s)
	select {
	case e.ended <- struct{}{}:
	default:
	}
}
