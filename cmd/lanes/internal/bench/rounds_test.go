package bench

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchRounds runs a tiny zero-work workload through lanes and raw
// polling in two rounds on the embedded broker: the report has one result
// per workload and consumer (the medians), says it has two rounds, and
// its target carries each round's value. No timing is asserted.
func TestBenchRounds(t *testing.T) {
	rep, out, errOut := runJSON[benchReport](t, "--sessions", "1000", "--messages", "3000", "--work", "0",
		"--partitions", "4", "--consumers", "lanes,raw-poll", "--rounds", "2")
	if rep.Rounds != 2 || len(rep.Results) != 2 {
		t.Fatalf("%d rounds, %d results: want 2 and 2 (one per consumer)\n%s", rep.Rounds, len(rep.Results), out)
	}
	for _, c := range []string{consLanes, consRaw} {
		if x := rep.find(rep.Workloads[0].Name, c); x == nil || x.Handled == 0 || x.Violations+x.Overlaps != 0 {
			t.Errorf("%s: %+v", c, x)
		}
	}
	if l := rep.find(rep.Workloads[0].Name, consLanes); l == nil || l.RatioTo != consRaw || l.Ratio <= 0 {
		t.Errorf("lanes has no ratio to raw polling: %+v", l)
	}
	if len(rep.Targets) == 0 {
		t.Fatalf("no targets\n%s", out)
	}
	for _, tg := range rep.Targets {
		if len(tg.Rounds) != 2 || tg.Value != median(tg.Rounds) || !strings.Contains(tg.Measured, "median of 2: ") {
			t.Errorf("target %q: value %v, rounds %v, measured %q", tg.Measure, tg.Value, tg.Rounds, tg.Measured)
		}
	}
	for _, s := range []string{"round 1/2, workload 1/1", "round 2/2, workload 1/1", "[4/4]"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut)
		}
	}
	var table bytes.Buffer
	rep.print(&table)
	if !strings.Contains(table.String(), "medians of 2 rounds (each ratio taken within its round)") ||
		!strings.Contains(table.String(), "4 runs (2 rounds of 2)") {
		t.Errorf("table does not say it shows medians of 2 rounds:\n%s", table.String())
	}
	if md := rep.markdown(nil); !strings.Contains(md, "medians of 2 rounds (each ratio taken within its round)") ||
		!strings.Contains(md, "--rounds 2") {
		t.Errorf("docs do not say it shows medians of 2 rounds:\n%s", md)
	}
}

// TestMedianOf: per workload and consumer, the median of each figure over
// the rounds (odd and even counts), the highest peaks, the summed
// violations and overlaps, and Finished only when every round finished.
func TestMedianOf(t *testing.T) {
	ms := time.Millisecond
	res := func(c string, steady, ratio float64, p99 time.Duration, heap uint64, g int, viol int64, finished bool) Result {
		return Result{Workload: "w", Consumer: c, Messages: 10, Handled: 10, Finished: finished, Steady: steady, Wall: steady / 2,
			Ratio: ratio, RatioTo: consRaw, OfCeiling: ratio / 2, P50: p99 / 10, P99: p99, P999: 2 * p99, Max: 3 * p99,
			Violations: viol, Overlaps: viol, AllocsPerMsg: steady / 100, PeakHeap: heap, PeakGoroutines: g, Elapsed: ms,
			cdf: []time.Duration{p99 / 10, p99}}
	}
	raw := func(steady float64) Result {
		return Result{Workload: "w", Consumer: consRaw, Steady: steady, Finished: true}
	}
	rounds := [][]Result{
		{res(consLanes, 300, 0.3, 30*ms, 5, 50, 0, true), raw(1000)},
		{raw(900), res(consLanes, 100, 0.9, 10*ms, 9, 10, 2, true)}, // another order: matched by name
		{res(consLanes, 200, 0.5, 20*ms, 7, 70, 1, true), raw(800)},
	}
	got := medianOf(rounds)
	if len(got) != 2 || got[0].Consumer != consLanes || got[1].Consumer != consRaw {
		t.Fatalf("results %+v", got)
	}
	l := got[0]
	if l.Steady != 200 || l.Wall != 100 || l.Ratio != 0.5 || l.RatioTo != consRaw || l.OfCeiling != 0.25 ||
		l.P50 != 2*ms || l.P99 != 20*ms || l.P999 != 40*ms || l.Max != 60*ms || l.AllocsPerMsg != 2 {
		t.Errorf("medians of 3: %+v", l)
	}
	if l.PeakHeap != 9 || l.PeakGoroutines != 70 || l.Violations != 3 || l.Overlaps != 3 || !l.Finished || l.Elapsed != 3*ms {
		t.Errorf("peaks, sums: %+v", l)
	}
	if !slices.Equal(l.cdf, []time.Duration{2 * ms, 20 * ms}) {
		t.Errorf("cdf %v, want the point-wise medians", l.cdf)
	}
	if got[1].Steady != 900 {
		t.Errorf("raw polling: steady %v, want 900", got[1].Steady)
	}

	even := medianOf([][]Result{rounds[0], rounds[1], rounds[2], {res(consLanes, 1000, 1, 40*ms, 1, 1, 0, false)}})[0]
	if even.Steady != 250 || even.Ratio != 0.7 || even.P99 != 25*ms || even.Finished || even.Violations != 3 {
		t.Errorf("medians of 4, one round not finished: %+v", even)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", m)
	}
	if m := median([]float64{}); m != 0 {
		t.Errorf("median of nothing = %v, want 0", m)
	}
}

// TestMedianTargets: each target's value is the median of the rounds'
// values, which it lists; one round is reported as measured.
func TestMedianTargets(t *testing.T) {
	round := func(v, p50 float64) []target {
		return []target{newTarget("ratio", "≥ 0.5", "%.2f", v, "detail"), newTarget("p50", "≤ 2 ms", "%.2f ms", p50, "")}
	}
	got := medianTargets([][]target{round(0.44, 1), round(0.37, 3), round(0.41, 2)})
	if len(got) != 2 || got[0].Value != 0.41 || got[0].Measured != "0.41 (median of 3: 0.44, 0.37, 0.41)" ||
		!slices.Equal(got[0].Rounds, []float64{0.44, 0.37, 0.41}) || got[1].Value != 2 || got[1].Measured != "2.00 ms (median of 3: 1.00 ms, 3.00 ms, 2.00 ms)" {
		t.Errorf("targets %+v", got)
	}
	one := medianTargets([][]target{round(0.44, 1)})
	if one[0].Measured != "0.44 (detail)" || one[0].Value != 0.44 || one[0].Rounds != nil {
		t.Errorf("one round: %+v", one[0])
	}
}
