package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// Several rounds of the suite (--rounds): each round runs every workload
// through every consumer, and the report shows per workload and consumer
// the median of each figure over the rounds. A round's ratios are taken
// within the round (against that round's raw polling and ceiling), so a
// drift of the machine's speed between rounds cancels out of them.

// medianOf combines the rounds' results per workload and consumer (in the
// first round's order): the median of each rate, ratio and latency and of
// allocs/msg, the highest peaks, the sums of violations, overlaps and
// elapsed time; Finished only when every round finished.
func medianOf(rounds [][]Result) []Result {
	type run struct{ workload, consumer string }
	var order []run
	of := map[run][]Result{}
	for _, rs := range rounds {
		for _, r := range rs {
			k := run{r.Workload, r.Consumer}
			if _, seen := of[k]; !seen {
				order = append(order, k)
			}
			of[k] = append(of[k], r)
		}
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		out = append(out, combine(of[k]))
	}
	return out
}

// combine is medianOf for one workload and consumer.
func combine(xs []Result) Result {
	x := Result{Workload: xs[0].Workload, Consumer: xs[0].Consumer, Messages: xs[0].Messages, Finished: true}
	var handled []int64
	var steady, wall, active, bound, ratios, ceil, allocs []float64
	var p50, p99, p999, most []time.Duration
	var cdfs [][]time.Duration
	for _, r := range xs {
		handled = append(handled, r.Handled)
		steady, wall, active = append(steady, r.Steady), append(wall, r.Wall), append(active, r.Active)
		bound, allocs = append(bound, r.Bound), append(allocs, r.AllocsPerMsg)
		if r.RatioTo != "" { // a round without its reference has no ratio
			ratios, x.RatioTo = append(ratios, r.Ratio), r.RatioTo
		}
		if r.OfCeiling > 0 {
			ceil = append(ceil, r.OfCeiling)
		}
		p50, p99, p999, most = append(p50, r.P50), append(p99, r.P99), append(p999, r.P999), append(most, r.Max)
		if len(r.cdf) > 0 {
			cdfs = append(cdfs, r.cdf)
		}
		x.Finished = x.Finished && r.Finished
		x.Violations, x.Overlaps = x.Violations+r.Violations, x.Overlaps+r.Overlaps
		x.PeakHeap, x.PeakGoroutines = max(x.PeakHeap, r.PeakHeap), max(x.PeakGoroutines, r.PeakGoroutines)
		x.Elapsed += r.Elapsed
	}
	x.Handled = median(handled)
	x.Steady, x.Wall, x.Active, x.Bound = median(steady), median(wall), median(active), median(bound)
	x.AllocsPerMsg = median(allocs)
	if len(ratios) > 0 {
		x.Ratio = median(ratios)
	}
	if len(ceil) > 0 {
		x.OfCeiling = median(ceil)
	}
	x.P50, x.P99, x.P999, x.Max = median(p50), median(p99), median(p999), median(most)
	x.cdf = medianCDF(cdfs)
	return x
}

// medianCDF is the median of the rounds' latency quantiles, point by point
// (every round samples the same quantiles).
func medianCDF(cdfs [][]time.Duration) []time.Duration {
	if len(cdfs) == 0 {
		return nil
	}
	n := len(cdfs[0])
	for _, c := range cdfs {
		n = min(n, len(c))
	}
	out := make([]time.Duration, n)
	at := make([]time.Duration, len(cdfs))
	for i := range out {
		for j, c := range cdfs {
			at[j] = c[i]
		}
		out[i] = median(at)
	}
	return out
}

// median is the middle value of xs (the mean of the two middle ones when
// their count is even); 0 for none.
func median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianTargets combines the rounds' targets, each measured within its
// round: the median of the rounds' values, and the values themselves.
func medianTargets(rounds [][]target) []target {
	if len(rounds) == 1 {
		return rounds[0]
	}
	var out []target // the first round's target of each measure, in order
	vals := map[string][]float64{}
	for _, rs := range rounds {
		for _, t := range rs {
			if _, seen := vals[t.Measure]; !seen {
				out = append(out, t)
			}
			vals[t.Measure] = append(vals[t.Measure], t.Value)
		}
	}
	for i, t := range out {
		vs := vals[t.Measure]
		parts := make([]string, len(vs))
		for j, v := range vs {
			parts[j] = t.format(v)
		}
		t.Value, t.Rounds = median(vs), vs
		t.Measured = fmt.Sprintf("%s (median of %d: %s)", t.format(t.Value), len(vs), strings.Join(parts, ", "))
		out[i] = t
	}
	return out
}

// roundsNote says how the figures of a report with several rounds were
// combined; "" for one round.
func (r *benchReport) roundsNote() string {
	if r.Rounds <= 1 {
		return ""
	}
	return fmt.Sprintf("medians of %s (each ratio taken within its round); peaks are the highest, viol the sum", cli.Count(r.Rounds, "round"))
}
