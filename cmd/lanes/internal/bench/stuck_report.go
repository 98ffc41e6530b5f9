package bench

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
)

// lagWatch samples the consumer's partitions during a run: the largest
// commit lag, how long each partition's committed offset stayed put with
// records after it, and the most records parked at once.
type lagWatch struct {
	peak   int64
	parked int64
	since  map[string]stallAt // partition → where its commit stands, since when
	stall  time.Duration
}

type stallAt struct {
	committed int64
	at        time.Time
}

func newLagWatch() *lagWatch { return &lagWatch{since: map[string]stallAt{}} }

func (w *lagWatch) sample(now time.Time, st consumer.Stats) {
	var parked int64
	for _, p := range st.Partitions {
		w.peak = max(w.peak, p.Lag)
		parked += int64(p.Park.Records)
		k := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		s, ok := w.since[k]
		if !ok || s.committed != p.Committed || p.Lag == 0 {
			w.since[k] = stallAt{p.Committed, now}
			continue
		}
		w.stall = max(w.stall, now.Sub(s.at))
	}
	w.parked = max(w.parked, parked)
}

// stuckReport is the --stuck comparison.
type stuckReport struct {
	Spec       string        `json:"stuck"`
	StuckFor   time.Duration `json:"stuck_for_ns"`
	Sessions   int           `json:"sessions"`
	Stuck      int           `json:"stuck_sessions"`
	Rate       int           `json:"msgs_per_s"`
	Duration   time.Duration `json:"send_duration_ns"`
	Work       time.Duration `json:"work_ns"`
	Partitions int           `json:"partitions"`
	Where      string        `json:"where"`
	Rounds     int           `json:"rounds"`
	// Results has one entry per mode: with several rounds, the median of
	// each figure over the rounds (its ratios each taken within a round),
	// the highest peak, and the sums of violations, overlaps and lost.
	Results []StuckResult `json:"results"`
}

// medianResults combines the rounds' results per mode (see Results).
func medianResults(rounds [][]StuckResult) []StuckResult {
	out := make([]StuckResult, len(rounds[0]))
	for i := range out {
		var rates, ratios, p99r []float64
		var p99s, stalls []time.Duration
		x := StuckResult{Mode: rounds[0][i].Mode, Finished: true}
		for _, rs := range rounds {
			r := rs[i]
			rates, ratios, p99r = append(rates, r.OthersRate), append(ratios, r.Ratio), append(p99r, r.P99Ratio)
			p99s, stalls = append(p99s, r.P99), append(stalls, r.LongestStall)
			x.PeakLag, x.Parked = max(x.PeakLag, r.PeakLag), max(x.Parked, r.Parked)
			x.Violations, x.Overlaps, x.Lost = x.Violations+r.Violations, x.Overlaps+r.Overlaps, x.Lost+r.Lost
			x.Finished = x.Finished && r.Finished
			x.Elapsed += r.Elapsed
		}
		x.OthersRate, x.Ratio, x.P99Ratio = median(rates), median(ratios), median(p99r)
		x.P99, x.LongestStall = median(p99s), median(stalls)
		out[i] = x
	}
	return out
}

// The targets of parking (docs/benchmarks.md): the other sessions keep at
// least minParkRatio of their no-stuck throughput, their p99 within
// maxParkP99 of the no-stuck p99.
const (
	minParkRatio = 0.9
	maxParkP99   = 1.5
)

func (r stuckReport) print(w io.Writer) {
	fmt.Fprintf(w, "lanes-lab bench --stuck %s: %s, %d stuck for %v; %d msg/s for %v, work %v, %s, %s\n",
		r.Spec, cli.Count(r.Sessions, "session"), r.Stuck, r.StuckFor, r.Rate, r.Duration, r.Work, cli.Count(r.Partitions, "partition"), r.Where)
	if r.Rounds > 1 {
		fmt.Fprintf(w, "medians of %d rounds (each ratio taken within its round); peaks are the highest, counts the sums\n", r.Rounds)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tothers msg/s\t÷ no stuck\tothers p99\tpeak commit lag\tlongest commit stall\tpeak parked\tviolations\toverlaps\tlost\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%v\t%d\t%v\t%d\t%d\t%d\t%d\t\n", x.Mode, x.OthersRate, x.Ratio, x.P99.Round(100*time.Microsecond),
			x.PeakLag, x.LongestStall.Round(100*time.Millisecond), x.Parked, x.Violations, x.Overlaps, x.Lost)
	}
	tw.Flush()
	inLane, park := r.Results[1], r.Results[2]
	fmt.Fprintf(w, "\npark: others %.2f of no-stuck throughput, p99 %v (%.2f× no-stuck), peak commit lag %d, longest commit stall %v, violations %d, lost %d\n",
		park.Ratio, park.P99.Round(100*time.Microsecond), park.P99Ratio, park.PeakLag,
		park.LongestStall.Round(100*time.Millisecond), park.Violations, park.Lost)
	fmt.Fprintf(w, "in-lane retries: others %.2f of no-stuck throughput, p99 %v (%.2f× no-stuck), longest commit stall %v\n",
		inLane.Ratio, inLane.P99.Round(100*time.Microsecond), inLane.P99Ratio, inLane.LongestStall.Round(100*time.Millisecond))
	for _, t := range r.targets() {
		mark := "met"
		if !t.ok {
			mark = "NOT met"
		}
		fmt.Fprintf(w, "target %-62s %s\n", t.what+":", mark)
	}
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type stuckTarget struct {
	what string
	ok   bool
}

// targets: parking keeps the others' throughput and p99; in-lane retries
// stall a partition's commits for most of the stuck duration (what
// parking is for). Order and loss hold in every run.
func (r stuckReport) targets() []stuckTarget {
	inLane, park := r.Results[1], r.Results[2]
	clean := true
	for _, x := range r.Results {
		clean = clean && x.Violations == 0 && x.Overlaps == 0 && x.Lost == 0
	}
	return []stuckTarget{
		{fmt.Sprintf("park: others' throughput ≥ %.1f× no stuck", minParkRatio), park.Ratio >= minParkRatio},
		{fmt.Sprintf("park: others' p99 ≤ %.1f× no stuck", maxParkP99), park.P99Ratio <= maxParkP99},
		{"in-lane retries: a partition's commits stall ≥ half the stuck time", inLane.LongestStall >= r.StuckFor/2},
		{"every run: no order violation, no overlap, nothing lost", clean},
	}
}

// verdict fails on broken order, an overlap or a loss in any run (always
// a bug); the timing targets are printed, not enforced (a noisy machine
// may miss them: compare runs).
func (r stuckReport) verdict() error {
	var errs []error
	for _, x := range r.Results {
		if x.Violations+x.Overlaps+x.Lost > 0 {
			errs = append(errs, fmt.Errorf("bench --stuck, %s: %s, %s, %d lost",
				x.Mode, cli.Count(x.Violations, "order violation"), cli.Count(x.Overlaps, "overlapping call"), x.Lost))
		}
	}
	return errors.Join(errs...)
}
