package consumer

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// refBreaker is the breaker's specification, written plainly: every
// outcome of the closed state kept in a list, the window counted from it.
type refBreaker struct {
	pol     BreakerPolicy
	open    bool
	probing bool
	next    time.Time
	events  []refEvent
}

type refEvent struct {
	at   time.Time
	fail bool
}

func (r *refBreaker) slot(t time.Time) int64 {
	return t.UnixNano() / int64(r.pol.Window/breakerBuckets)
}

func (r *refBreaker) window(now time.Time) (calls, fails int) {
	cur := r.slot(now)
	for _, e := range r.events {
		if s := r.slot(e.at); s > cur-breakerBuckets && s <= cur {
			calls++
			if e.fail {
				fails++
			}
		}
	}
	return calls, fails
}

func (r *refBreaker) allow(now time.Time) (probe, ok bool) {
	switch {
	case !r.open:
		return false, true
	case !r.probing && !now.Before(r.next):
		r.probing = true
		return true, true
	}
	return false, false
}

func (r *refBreaker) report(now time.Time, probe bool, o outcome) transition {
	if probe {
		r.probing = false
	}
	if r.open {
		if !probe {
			return stay
		}
		switch o {
		case success:
			r.open, r.events = false, nil
			return becameClosed
		case failure:
			r.next = now.Add(r.pol.ProbeInterval)
		default:
			r.next = now
		}
		return stay
	}
	if o == neutral {
		return stay
	}
	r.events = append(r.events, refEvent{now, o == failure})
	calls, fails := r.window(now)
	if o == failure && calls >= r.pol.MinCalls && float64(fails) >= r.pol.FailureRatio*float64(calls) {
		r.open, r.next, r.events = true, now.Add(r.pol.ProbeInterval), nil
		return becameOpen
	}
	return stay
}

// TestBreakerModel drives the breaker and its reference with the same
// random attempts (started by random lanes, ending in random outcomes) and
// a random clock, and compares every answer and the state after each step.
func TestBreakerModel(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		pol := BreakerPolicy{
			Window:        time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond,
			FailureRatio:  []float64{0.1, 0.5, 0.8, 1}[rng.IntN(4)],
			MinCalls:      1 + rng.IntN(30),
			ProbeInterval: time.Duration(1+rng.IntN(50)) * 10 * time.Millisecond,
		}
		failP := rng.Float64() // this run's share of failures
		b, ref := newBreaker(pol), &refBreaker{pol: pol}
		now := time.Unix(1_700_000_000, 0)
		type attempt struct{ probe bool }
		var running []attempt
		opens, closes := 0, 0
		for step := 0; step < 3000; step++ {
			switch op := rng.IntN(10); {
			case op < 4: // a lane asks to start an attempt
				gp, gok, wait, ch := b.allow(now)
				wp, wok := ref.allow(now)
				if gp != wp || gok != wok {
					t.Fatalf("seed %d step %d: allow = (probe %v, ok %v), want (%v, %v)", seed, step, gp, gok, wp, wok)
				}
				if !gok && (wait <= 0 || wait > pol.ProbeInterval || ch == nil) {
					t.Fatalf("seed %d step %d: refused with wait %v, channel %v", seed, step, wait, ch)
				}
				if gok {
					running = append(running, attempt{gp})
				}
			case op < 8 && len(running) > 0: // an attempt ends
				i := rng.IntN(len(running))
				a := running[i]
				running = slices.Delete(running, i, i+1)
				o := success
				if r := rng.Float64(); r < 0.05 {
					o = neutral
				} else if r < failP {
					o = failure
				}
				got, want := b.report(now, a.probe, o), ref.report(now, a.probe, o)
				if got != want {
					t.Fatalf("seed %d step %d: report(probe %v, %v) = %v, want %v", seed, step, a.probe, o, got, want)
				}
				opens += boolN(got == becameOpen)
				closes += boolN(got == becameClosed)
			default: // time passes: within a bucket, or across windows
				now = now.Add(time.Duration(rng.Int64N(int64(pol.Window) / 3)))
			}
			st := b.snapshot(now)
			if st.Open != ref.open || b.openNow() != ref.open {
				t.Fatalf("seed %d step %d: open %v (flag %v), want %v", seed, step, st.Open, b.openNow(), ref.open)
			}
			if !ref.open {
				if c, f := ref.window(now); st.Calls != c || st.Failures != f {
					t.Fatalf("seed %d step %d: window %d/%d, want %d/%d", seed, step, st.Failures, st.Calls, f, c)
				}
			}
		}
		if st := b.snapshot(now); st.Opens != int64(opens) {
			t.Fatalf("seed %d: Opens %d, counted %d", seed, st.Opens, opens)
		}
		_ = closes
	}
}

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
	b := newBreaker(pol)
	now := time.Unix(1_700_000_000, 0)
	for i, o := range []outcome{failure, success, failure} {
		if tr := b.report(now, false, o); tr != stay {
			t.Fatalf("outcome %d: %v below MinCalls", i, tr)
		}
	}
	if tr := b.report(now, false, failure); tr != becameOpen {
		t.Fatalf("3 of 4 failed: %v, want opened", tr)
	}
	_, ok, wait, ch := b.allow(now)
	if ok || wait != time.Second {
		t.Fatalf("allow right after opening: ok %v wait %v", ok, wait)
	}
	if tr := b.report(now, false, success); tr != stay {
		t.Fatalf("a success that is not a probe closed it: %v", tr)
	}
	now = now.Add(time.Second)
	if probe, ok, _, _ := b.allow(now); !probe || !ok {
		t.Fatal("no probe after ProbeInterval")
	}
	if _, ok, _, _ := b.allow(now); ok {
		t.Fatal("a second attempt admitted while the probe runs")
	}
	if tr := b.report(now, true, failure); tr != stay {
		t.Fatalf("failed probe: %v", tr)
	}
	now = now.Add(time.Second)
	probe, _, _, _ := b.allow(now)
	if tr := b.report(now, probe, success); tr != becameClosed {
		t.Fatalf("successful probe: %v, want closed", tr)
	}
	select {
	case <-ch:
	default:
		t.Fatal("waiters not woken on close")
	}
	if st := b.snapshot(now); st.Open || st.Opens != 1 || st.Probes != 2 || st.Calls != 0 {
		t.Fatalf("stats after close: %+v", st)
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
		MeterProvider: mp, Breaker: BreakerPolicy{Enabled: true, MinCalls: 3, ProbeInterval: time.Nanosecond}}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	c.workCtx = context.Background()
	live := newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil)
	gauge := func() (open, opens, excused int64) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					if m.Name == "lanes.consumer.breaker.open" {
						open = d.DataPoints[0].Value
					}
				case metricdata.Sum[int64]:
					switch m.Name {
					case "lanes.consumer.breaker.opens":
						opens = d.DataPoints[0].Value
					case "lanes.consumer.breaker.excused":
						excused = d.DataPoints[0].Value
					}
				}
			}
		}
		return open, opens, excused
	}
	down := errors.New("database down")
	for i := 0; i < 3; i++ {
		if excused := c.breakerReport(live, false, down); excused != (i == 2) {
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
	if c.breakerReport(live, false, Permanent(down)) {
		t.Error("a permanent error was excused")
	}
	if !c.flow.wantsHold() || !strings.Contains(string(logs.Bytes()), "circuit breaker open") {
		t.Errorf("on open: hold %v, log %s", c.flow.wantsHold(), logs.Bytes())
	}
	w := &work{p: live}
	probe, _, ok := c.breakerWait(w)
	if !probe || !ok {
		t.Fatalf("breakerWait after the probe interval: probe %v ok %v", probe, ok)
	}
	c.breakerReport(live, true, nil)
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
}

// TestBreakerIdleResumesFetching: an open breaker with no lane holding a
// record (all ended while it was open) lets fetching resume once a probe
// is due, so a record can arrive to probe with; a lane that then waits
// holds fetching again.
func TestBreakerIdleResumesFetching(t *testing.T) {
	c := &Consumer{flow: newFlow(), brk: newBreaker(BreakerPolicy{Enabled: true, Window: time.Second, FailureRatio: 0.5,
		MinCalls: 1, ProbeInterval: time.Hour})}
	c.flow.holdFn = c.brk.wantsHold
	lg := zerolog.Nop()
	c.cfg.Logger, c.workCtx = &lg, context.Background()
	c.breakerReport(newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil), false, errors.New("down"))
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
