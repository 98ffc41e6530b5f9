package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lanesdev/lanes/tracing"
)

// TestProcessSpans: a record sent with a send span is processed in spans
// linked to it, one per attempt; the retry and the DLQ write are events;
// the handler's context carries the span.
func TestProcessSpans(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tracing.New(tp, nil)

	cl := e.client()
	defer cl.Close()
	var sendSpans []string
	for _, v := range []string{"a|0", "a|1"} {
		r := &kgo.Record{Topic: "chats", Key: []byte("a"), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "lanes-event-id", Value: []byte(v)}}}
		_, span := tr.StartSend(context.Background(), r, "a", v)
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		tracing.EndSend(span, r, nil)
		sendSpans = append(sendSpans, span.SpanContext().SpanID().String())
	}

	spanInCtx := make(chan bool, 8)
	h := newRecorder(2, func(ctx context.Context, m *Message) error {
		spanInCtx <- sdktraceSpanValid(ctx)
		switch {
		case string(m.Record.Value) == "a|0" && m.Attempt == 1:
			return errors.New("transient")
		case string(m.Record.Value) == "a|1":
			return Permanent(errors.New("poison"))
		}
		return nil
	})
	cfg := e.config("g-trace", "chats")
	cfg.TracerProvider = tp
	var logBuf syncBuffer
	logger := zerolog.New(&logBuf)
	cfg.Logger = &logger
	runAll(t, cfg, h, 1)
	for i := 0; i < 3; i++ {
		if !<-spanInCtx {
			t.Fatal("handler context has no valid span")
		}
	}
	var process []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "process chats" {
			process = append(process, s)
		}
	}
	if len(process) != 3 {
		t.Fatalf("%d process spans, want 3 (a|0 twice, a|1 once)", len(process))
	}
	// lanes' own log line for the DLQ write carries the trace and record IDs.
	var line map[string]any
	for _, l := range bytes.Split(logBuf.Bytes(), []byte("\n")) {
		if bytes.Contains(l, []byte("record dead-lettered")) {
			_ = json.Unmarshal(l, &line)
		}
	}
	if line["trace_id"] != process[2].SpanContext().TraceID().String() || line["session_id"] != "a" || line["event_id"] != "a|1" {
		t.Errorf("DLQ log line lacks trace/session/event fields: %v", line)
	}
	wantLink := []string{sendSpans[0], sendSpans[0], sendSpans[1]}
	wantEvent := []string{tracing.EventRetry, "", tracing.EventDeadLetter}
	for i, s := range process {
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID().String() != wantLink[i] {
			t.Errorf("span %d links %v, want send span %s", i, s.Links(), wantLink[i])
		}
		got := ""
		for _, ev := range s.Events() {
			if ev.Name != "exception" {
				got = ev.Name
			}
		}
		if got != wantEvent[i] {
			t.Errorf("span %d event %q, want %q", i, got, wantEvent[i])
		}
		attempt := int64(0)
		for _, kv := range s.Attributes() {
			if kv.Key == tracing.AttrAttempt {
				attempt = kv.Value.AsInt64()
			}
		}
		if want := []int64{1, 2, 1}[i]; attempt != want {
			t.Errorf("span %d lanes.attempt %d, want %d", i, attempt, want)
		}
	}
}

// TestMetricsReflectRun: retries, a DLQ write, and a paused partition with
// its lag, read through an in-memory metric reader, match Stats.
func TestMetricsReflectRun(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0", "b|0")
	e.produce("chats", []string{"slow"}, 50)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	gate := make(chan struct{})
	h := newRecorder(52, func(ctx context.Context, m *Message) error {
		switch {
		case m.SessionID == "slow":
			<-gate
		case string(m.Record.Value) == "a|0" && m.Attempt < 3:
			return errors.New("transient")
		case string(m.Record.Value) == "b|0":
			return Permanent(errors.New("poison"))
		}
		return nil
	})
	cfg := e.config("g-metrics", "chats")
	cfg.MeterProvider = mp
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = 10, 5
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	// Retries reach 2 at a|0's second failure, before its third attempt
	// runs: the state to compare is the one after it (a|0 and b|0 done, the
	// watermark at 2, only the slow session's lane left), which holds still
	// while the slow handler waits.
	waitFor(t, "a|0 and b|0 done, a paused partition with lag", func() bool {
		st := c.Stats()
		return st.Retries == 2 && st.DeadLettered == 1 && st.ActiveSessions == 1 && len(st.Partitions) == 1 &&
			st.Partitions[0].Watermark == 2 && st.Partitions[0].Paused && st.Partitions[0].Lag > 0
	}, func() string { return fmt.Sprintf("%+v", c.Stats()) })
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					got[m.Name+reasonOf(dp.Attributes)] += dp.Value
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					got[m.Name] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					got[m.Name] += int64(dp.Count)
				}
			}
		}
	}
	want := map[string]int64{
		"lanes.consumer.retries":                 st.Retries,
		"lanes.consumer.dead_letters{permanent}": 1,
		"lanes.consumer.paused":                  1,
		"lanes.consumer.lag":                     st.Partitions[0].Lag,
		"lanes.consumer.sessions.active":         int64(st.ActiveSessions),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("metric %s = %d, want %d (Stats)", k, got[k], v)
		}
	}
	if got["lanes.consumer.handler.duration"] < 4 {
		t.Errorf("handler duration histogram count %d, want >= 4", got["lanes.consumer.handler.duration"])
	}
	close(gate)
	h.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func reasonOf(s attribute.Set) string {
	if v, ok := s.Value("lanes.dlq.reason"); ok {
		return "{" + v.AsString() + "}"
	}
	return ""
}

func sdktraceSpanValid(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid()
}
