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
)

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBreakerOpensAndProbes walks one outage: the breaker stays closed
// below MinCalls and below the ratio, opens at both, admits one probe per
// interval, ignores outcomes of attempts that are not probes, and closes on
// a probe's success, waking the lanes waiting for it.
func TestBreakerOpensAndProbes(t *testing.T) {
	pol, err := BreakerPolicy{Enabled: true, MinCalls: 4, FailureRatio: 0.5, ProbeInterval: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b := newBreaker(pol, time.Minute)
	now := time.Unix(1_700_000_000, 0)
	for i, o := range []outcome{failure, success, failure} {
		if tr, _ := b.report(now, 0, o); tr != stay {
			t.Fatalf("outcome %d: %v below MinCalls", i, tr)
		}
	}
	if tr, _ := b.report(now, 0, failure); tr != becameOpen {
		t.Fatalf("3 of 4 failed: %v, want opened", tr)
	}
	a := b.allow(now)
	if a.ok || a.wait != time.Second {
		t.Fatalf("allow right after opening: %+v", a)
	}
	ch := a.closed
	if tr, _ := b.report(now, 0, success); tr != stay {
		t.Fatalf("a success that is not a probe closed it: %v", tr)
	}
	now = now.Add(time.Second)
	p1 := b.allow(now)
	if p1.probe == 0 || !p1.ok {
		t.Fatal("no probe after ProbeInterval")
	}
	if a := b.allow(now); a.ok {
		t.Fatal("a second attempt admitted while the probe runs")
	}
	if tr, _ := b.report(now, p1.probe, failure); tr != stay {
		t.Fatalf("failed probe: %v", tr)
	}
	now = now.Add(time.Second)
	p2 := b.allow(now)
	if tr, _ := b.report(now, p2.probe, success); tr != becameClosed {
		t.Fatalf("successful probe: %v, want closed", tr)
	}
	select {
	case <-ch:
	default:
		t.Fatal("waiters not woken on close")
	}
	if st := b.snapshot(now); st.Open || st.Opens != 1 || st.Probes != 2 || st.Calls != 0 || st.HungProbes != 0 {
		t.Fatalf("stats after close: %+v", st)
	}
}

// TestBreakerProbeGivenUpAsHung walks a hung probe: it holds the probe
// until its limit, is then given up (counted as a failed probe, named
// once), the next probe starts ProbeInterval later on another lane, and
// the hung probe's late success neither closes the breaker nor frees the
// probe that replaced it; a probe that returns only past its limit is
// given up by its own report; after the breaker closed and opened again,
// an old probe's report judges nothing.
func TestBreakerProbeGivenUpAsHung(t *testing.T) {
	const limit, interval = 10 * time.Second, time.Second
	b := newBreaker(BreakerPolicy{Enabled: true, Window: time.Minute, FailureRatio: 0.5, MinCalls: 1, ProbeInterval: interval}, limit)
	now := time.Unix(1_700_000_000, 0)
	if tr, _ := b.report(now, 0, failure); tr != becameOpen {
		t.Fatal("not opened")
	}
	now = now.Add(interval)
	p1 := b.allow(now)
	if p1.probe == 0 {
		t.Fatal("no probe")
	}
	started := now
	if a := b.allow(started.Add(limit - 1)); a.ok || a.hung != 0 || a.wait != interval {
		t.Fatalf("just before its limit: %+v", a)
	}
	if idle, hung := b.idle(started.Add(limit - 1)); idle || hung != 0 {
		t.Fatalf("idle just before the limit: %v, hung %d", idle, hung)
	}
	if st := b.snapshot(started.Add(limit)); st.HungProbes != 1 {
		t.Fatalf("Stats at the limit: HungProbes %d, want 1", st.HungProbes)
	}
	a := b.allow(started.Add(limit))
	if a.ok || a.hung != p1.probe || a.wait != interval {
		t.Fatalf("at the limit: %+v, want refused with the hung probe %d named, wait %v", a, p1.probe, interval)
	}
	if a := b.allow(started.Add(limit + interval/2)); a.ok || a.hung != 0 || a.wait != interval/2 {
		t.Fatalf("half an interval later: %+v (a probe is named once)", a)
	}
	now = started.Add(limit + interval)
	p2 := b.allow(now)
	if !p2.ok || p2.probe == 0 || p2.probe == p1.probe {
		t.Fatalf("ProbeInterval after the hung probe: %+v, want a new probe", p2)
	}
	if tr, hung := b.report(now, p1.probe, success); tr != stay || hung != 0 {
		t.Fatalf("the hung probe's late success: %v (hung %d), want ignored", tr, hung)
	}
	if a := b.allow(now); a.ok {
		t.Fatal("the hung probe's late report freed the running probe's place")
	}
	// p2 returns only past its own limit: its report gives it up.
	now = now.Add(limit)
	if tr, hung := b.report(now, p2.probe, success); tr != stay || hung != p2.probe {
		t.Fatalf("a probe reporting past its limit: %v (hung %d), want stay, given up", tr, hung)
	}
	if a := b.allow(now); a.ok || a.wait != interval {
		t.Fatalf("after the late probe: %+v, want the next probe ProbeInterval after its limit", a)
	}
	now = now.Add(interval)
	p3 := b.allow(now)
	if tr, _ := b.report(now, p3.probe, success); tr != becameClosed {
		t.Fatalf("p3's success: %v, want closed", tr)
	}
	if tr, _ := b.report(now, 0, failure); tr != becameOpen {
		t.Fatal("not opened again")
	}
	if tr, _ := b.report(now, p1.probe, success); tr != stay {
		t.Fatalf("a probe of the last opening judged this one: %v", tr)
	}
	if st := b.snapshot(now); !st.Open || st.Probes != 3 || st.HungProbes != 2 {
		t.Fatalf("stats: %+v, want open, 3 probes, 2 hung", st)
	}
}

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
	c := &Consumer{flow: newFlow(), brk: newBreaker(BreakerPolicy{Enabled: true, Window: time.Second, FailureRatio: 0.5,
		MinCalls: 1, ProbeInterval: time.Hour}, time.Minute)}
	c.flow.holdFn = c.brk.wantsHold
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
	if !c.brk.openNow() || !c.flow.wantsHold() {
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
	c.brk.waiters.Add(1)            // a lane holds a record
	c.brk.idleReleased.Store(false) // as the waiting lane does
	c.breakerIdle(time.Now().Add(2 * time.Hour))
	if !c.flow.wantsHold() {
		t.Fatal("fetching resumed while a lane holds a record to probe with")
	}
}
