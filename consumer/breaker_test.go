package consumer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

func TestBreakerPolicyValidation(t *testing.T) {
	for _, bad := range []BreakerPolicy{
		{Enabled: true, FailureRatio: 1.5}, {Enabled: true, FailureRatio: -0.1},
		{Enabled: true, Window: -1}, {Enabled: true, MinCalls: -1}, {Enabled: true, ProbeInterval: -1},
	} {
		cfg := Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d", Breaker: bad}
		if _, err := cfg.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", bad, err)
		}
	}
	cfg := Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d", Breaker: BreakerPolicy{Enabled: true}}
	got, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	want := BreakerPolicy{Enabled: true, Window: DefaultBreakerWindow, FailureRatio: DefaultBreakerFailureRatio,
		MinCalls: DefaultBreakerMinCalls, ProbeInterval: DefaultBreakerProbeInterval}
	if got.Breaker != want {
		t.Errorf("defaults %+v, want %+v", got.Breaker, want)
	}
	if got, _ := (Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"}).validate(); got.Breaker != (BreakerPolicy{}) {
		t.Errorf("zero Breaker became %+v: the zero value must stay off", got.Breaker)
	}
}

// TestBreakerObservability opens and closes a consumer's breaker through
// the lane's report path and checks Stats, the metrics, the Health reason,
// the log lines and the flow's hold at each step.
func TestBreakerObservability(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	var logs syncBuffer
	lg := zerolog.New(&logs)
	cfg := Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d", Logger: &lg,
		MeterProvider: mp, HandlerTimeout: 10 * time.Millisecond,
		Breaker: BreakerPolicy{Enabled: true, MinCalls: 3, ProbeInterval: time.Nanosecond}}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	c.workCtx = context.Background()
	live := newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil)
	metric := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					if strings.HasPrefix(m.Name, "lanes.consumer.breaker.") {
						out[m.Name] = d.DataPoints[0].Value
					}
				case metricdata.Sum[int64]:
					if strings.HasPrefix(m.Name, "lanes.consumer.breaker.") {
						out[m.Name] = d.DataPoints[0].Value
					}
				}
			}
		}
		return out
	}
	gauge := func() (open, opens, excused int64) {
		m := metric()
		return m["lanes.consumer.breaker.open"], m["lanes.consumer.breaker.opens"], m["lanes.consumer.breaker.excused"]
	}
	down := errors.New("database down")
	for i := 0; i < 3; i++ {
		if excused := c.breakerReport(live, 0, down); excused != (i == 2) {
			t.Fatalf("failure %d: excused %v", i, excused)
		}
	}
	st := c.Stats().Breaker
	if !st.Open || st.Calls != 3 || st.Failures != 3 || st.Opens != 1 || st.Excused != 1 {
		t.Fatalf("Stats.Breaker after opening: %+v", st)
	}
	if open, opens, excused := gauge(); open != 1 || opens != 1 || excused != 1 {
		t.Errorf("metrics open %d opens %d excused %d, want 1 1 1", open, opens, excused)
	}
	h := c.health(c.Stats(), time.Now())
	if !slices.ContainsFunc(h.Reasons, func(r string) bool {
		return strings.HasPrefix(r, "breaker open since") && strings.Contains(r, "3 of 3 attempts failed")
	}) {
		t.Errorf("Health reasons %q", h.Reasons)
	}
	if c.breakerReport(live, 0, Permanent(down)) {
		t.Error("a permanent error was excused")
	}
	if !c.flow.wantsHold() || !strings.Contains(string(logs.Bytes()), "circuit breaker open") {
		t.Errorf("on open: hold %v, log %s", c.flow.wantsHold(), logs.Bytes())
	}
	w := &work{p: live}
	probe, _, ok := c.breakerWait(w)
	if probe == 0 || !ok {
		t.Fatalf("breakerWait after the probe interval: probe %v ok %v", probe, ok)
	}
	c.breakerReport(live, probe, nil)
	if st := c.Stats().Breaker; st.Open || st.Probes != 1 {
		t.Errorf("after a successful probe: %+v", st)
	}
	if open, _, _ := gauge(); open != 0 {
		t.Errorf("breaker.open = %d after closing", open)
	}
	if c.flow.wantsHold() || !strings.Contains(string(logs.Bytes()), "circuit breaker closed") {
		t.Errorf("on close: hold %v, log %s", c.flow.wantsHold(), logs.Bytes())
	}
	for _, r := range c.health(c.Stats(), time.Now()).Reasons {
		if strings.HasPrefix(r, "breaker") {
			t.Errorf("closed breaker still in Health: %q", r)
		}
	}

	// Open again; the probe hangs: the watchdog's tick past HandlerTimeout
	// and its grace gives it up, names its record, counts it.
	for i := 0; i < 3; i++ {
		c.breakerReport(live, 0, down)
	}
	w = &work{p: w.p, rec: &kgoRecord{Topic: "t", Partition: 0, Offset: 42}, session: "chat-7"}
	probe, _, ok = c.breakerWait(w)
	if probe == 0 || !ok {
		t.Fatalf("no probe after opening again: %v %v", probe, ok)
	}
	c.breakerIdle(time.Now().Add(time.Second))
	if st := c.Stats().Breaker; !st.Open || st.HungProbes != 1 || st.Probes != 2 {
		t.Errorf("after the probe was given up: %+v", st)
	}
	if n := metric()["lanes.consumer.breaker.hung_probes"]; n != 1 {
		t.Errorf("breaker.hung_probes = %d, want 1", n)
	}
	line := ""
	for _, l := range strings.Split(string(logs.Bytes()), "\n") {
		if strings.Contains(l, "probe given up as hung") {
			line = l
		}
	}
	for _, want := range []string{`"topic":"t"`, `"partition":0`, `"offset":42`, `"session":"chat-7"`, `"level":"warn"`} {
		if !strings.Contains(line, want) {
			t.Errorf("hung probe warning %q lacks %s", line, want)
		}
	}
	if c.breakerReport(live, probe, nil); !c.Stats().Breaker.Open {
		t.Error("the hung probe's late success closed the breaker")
	}
}

// breakerOnly is a consumer with just its breaker (one failed attempt
// opens it; a probe is due only after an hour) and the flow controller it
// holds, to drive the breaker's gate without a broker.
func breakerOnly() *Consumer {
	c := &Consumer{flow: newFlow(), brk: breaker.New(breaker.Policy{Window: time.Second, FailureRatio: 0.5,
		MinCalls: 1, ProbeInterval: time.Hour}, time.Minute, nil)}
	c.flow.holdFn = c.brk.WantsHold
	lg := zerolog.Nop()
	c.cfg.Logger, c.workCtx = &lg, context.Background()
	return c
}

// TestBreakerIdleResumesFetching: an open breaker with no lane holding a
// record (all ended while it was open) lets fetching resume once a probe
// is due, so a record can arrive to probe with; a lane that then waits
// holds fetching again.
func TestBreakerIdleResumesFetching(t *testing.T) {
	c := breakerOnly()
	c.breakerReport(newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil), 0, errors.New("down"))
	if !c.brk.OpenNow() || !c.flow.wantsHold() {
		t.Fatal("not open and held after a failure with MinCalls 1")
	}
	c.breakerIdle(time.Now())
	if !c.flow.wantsHold() {
		t.Fatal("fetching resumed before a probe was due")
	}
	c.breakerIdle(time.Now().Add(2 * time.Hour))
	if c.flow.wantsHold() {
		t.Fatal("an open breaker with nothing to probe with keeps fetching paused")
	}
	c.brk.BeginWait() // a lane holds a record, and clears the idle release as the waiting lane does
	c.breakerIdle(time.Now().Add(2 * time.Hour))
	if !c.flow.wantsHold() {
		t.Fatal("fetching resumed while a lane holds a record to probe with")
	}
}
