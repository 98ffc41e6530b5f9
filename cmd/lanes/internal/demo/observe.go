package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/tracing"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// observe holds the demo's optional OpenTelemetry set-up: --trace records
// the spans of a few sessions and prints some complete traces at the end;
// --metrics-addr serves Prometheus metrics while the demo runs.
type observe struct {
	tp    *sdktrace.TracerProvider
	spans *sessionSpans
	mp    *sdkmetric.MeterProvider
	srv   *http.Server
	done  chan struct{}
	// health serves the running consumer's HealthHandler under /lanes/.
	health atomic.Pointer[http.Handler]
}

// serveHealth makes /lanes/ (livez, readyz, debug/lanes) answer for c.
func (o *observe) serveHealth(c *consumer.Consumer) {
	h := http.StripPrefix("/lanes", c.HealthHandler())
	o.health.Store(&h)
}

// tracedSessions are the sessions whose spans --trace keeps.
const tracedSessions = 10

func setupObserve(cfg demoConfig, stdout io.Writer) (*observe, error) {
	o := &observe{}
	if cfg.trace {
		o.spans = &sessionSpans{keep: map[string]bool{}, byTrace: map[trace.TraceID][]sdktrace.ReadOnlySpan{}}
		for i := 0; i < min(tracedSessions, cfg.sessions); i++ {
			o.spans.keep[sessionName(i)] = true
		}
		o.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	}
	if cfg.metricsAddr != "" {
		exp, err := prometheus.New()
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		ln, err := net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", cfg.metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		mux.HandleFunc("/lanes/", func(w http.ResponseWriter, r *http.Request) {
			if h := o.health.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			http.Error(w, "no consumer yet", http.StatusServiceUnavailable)
		})
		o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		o.done = make(chan struct{})
		go func() {
			defer close(o.done)
			_ = o.srv.Serve(ln)
		}()
		fmt.Fprintf(stdout, "metrics: http://%s/metrics (Prometheus); health: /lanes/livez, /lanes/readyz, /lanes/debug/lanes\n", ln.Addr())
	}
	return o, nil
}

// close stops the metrics server and flushes the providers.
func (o *observe) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if o.srv != nil {
		_ = o.srv.Shutdown(ctx)
		<-o.done
	}
	if o.mp != nil {
		_ = o.mp.Shutdown(ctx)
	}
	if o.tp != nil {
		_ = o.tp.Shutdown(ctx)
	}
}

// printTraces prints up to n complete traces, those with a dead-letter
// write or retries first: a readable outline, then the spans as the
// OpenTelemetry stdout exporter writes them.
func (o *observe) printTraces(w io.Writer, n int) error {
	if o.spans == nil {
		return nil
	}
	traces := o.spans.pick(n)
	fmt.Fprintf(w, "\ntraces (%d of the sessions %s..%s; send → process attempts → DLQ)\n",
		len(traces), sessionName(0), sessionName(tracedSessions-1))
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return err
	}
	for _, spans := range traces {
		fmt.Fprintf(w, "trace %s\n", spans[0].SpanContext().TraceID())
		for _, s := range spans {
			fmt.Fprintf(w, "  %-9s %-22s %8s %s\n", strings.ToLower(s.SpanKind().String()), s.Name(),
				s.EndTime().Sub(s.StartTime()).Round(10*time.Microsecond), outline(s))
		}
	}
	if len(traces) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nthe first trace's spans, as the OpenTelemetry stdout exporter writes them:")
	return exp.ExportSpans(context.Background(), traces[0])
}

func outline(s sdktrace.ReadOnlySpan) string {
	var parts []string
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case tracing.AttrSessionID, tracing.AttrAttempt, "messaging.kafka.offset":
			parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
		}
	}
	for _, ev := range s.Events() {
		if ev.Name != "exception" {
			parts = append(parts, "event:"+ev.Name)
		}
	}
	if s.Status().Description != "" {
		parts = append(parts, "error: "+s.Status().Description)
	}
	return strings.Join(parts, " ")
}

// sessionSpans is a span processor that keeps the ended spans of a few
// sessions, grouped by trace.
type sessionSpans struct {
	keep    map[string]bool
	mu      sync.Mutex
	byTrace map[trace.TraceID][]sdktrace.ReadOnlySpan
}

func (p *sessionSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *sessionSpans) Shutdown(context.Context) error                  { return nil }
func (p *sessionSpans) ForceFlush(context.Context) error                { return nil }

func (p *sessionSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, kv := range s.Attributes() {
		if kv.Key == tracing.AttrSessionID && p.keep[kv.Value.AsString()] {
			p.mu.Lock()
			id := s.SpanContext().TraceID()
			p.byTrace[id] = append(p.byTrace[id], s)
			p.mu.Unlock()
			return
		}
	}
}

// pick returns up to n traces, ranked: a DLQ write, then most spans
// (retries), each sorted by start time.
func (p *sessionSpans) pick(n int) [][]sdktrace.ReadOnlySpan {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all [][]sdktrace.ReadOnlySpan
	for _, spans := range p.byTrace {
		sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
		all = append(all, spans)
	}
	score := func(spans []sdktrace.ReadOnlySpan) int {
		s := len(spans)
		for _, sp := range spans {
			for _, ev := range sp.Events() {
				if ev.Name == tracing.EventDeadLetter {
					s += 1000
				}
			}
		}
		return s
	}
	sort.SliceStable(all, func(i, j int) bool { return score(all[i]) > score(all[j]) })
	return all[:min(n, len(all))]
}
