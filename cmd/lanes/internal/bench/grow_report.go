package bench

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// GrowResult is one arm's figures in a --grow run. The other sessions are
// those the growth does not move (classStays and classChecked); latencies
// are of the messages sent from the growth on (the same moment, halfway
// through the sending, in the arm that does not grow).
type GrowResult struct {
	Arm string `json:"arm"`
	// OthersRate is the other sessions' messages handled per second from
	// the growth to the end of the sending; OthersRatio is it ÷ the
	// no-growth arm's in the same round.
	OthersRate     float64       `json:"others_msgs_per_s"`
	OthersRatio    float64       `json:"others_ratio"`
	OthersP99      time.Duration `json:"others_p99_ns"`
	OthersP99Ratio float64       `json:"others_p99_ratio"`
	// MovedP50 and MovedP99 are the moved sessions' latency, send to
	// handled; the Extra figures are them − the no-growth arm's (the same
	// sessions, the same round), MovedP99Ratio the p99 ÷ the no-growth one.
	MovedP50      time.Duration `json:"moved_p50_ns"`
	MovedP99      time.Duration `json:"moved_p99_ns"`
	MovedP50Extra time.Duration `json:"moved_p50_extra_ns"`
	MovedP99Extra time.Duration `json:"moved_p99_extra_ns"`
	MovedP99Ratio float64       `json:"moved_p99_ratio"`
	// MovedReleased and MovedParked are the consumer's Stats at the end;
	// LongestWait the longest Stats.Growing[].OldestWait seen (sampled
	// every 100 ms), PeakWaiting the most sessions waiting at once.
	MovedReleased int64         `json:"moved_released"`
	MovedParked   int64         `json:"moved_parked"`
	LongestWait   time.Duration `json:"longest_wait_ns"`
	PeakWaiting   int           `json:"peak_waiting"`
	// Learned is from the growth to the send of the first record the
	// producer placed on a new partition; GrowTook how long the
	// partitions' creation took (kadm UpdatePartitions). 0 without growth.
	Learned    time.Duration `json:"producer_learned_ns"`
	GrowTook   time.Duration `json:"grow_took_ns"`
	Violations int           `json:"order_violations"`
	Overlaps   int           `json:"overlapping_calls"`
	Lost       int           `json:"lost"`
	Duplicates int           `json:"duplicates"`
	Finished   bool          `json:"finished"`
	Elapsed    time.Duration `json:"elapsed_ns"`
}

// within sets r's ratios and extras against base, the no-growth arm of
// the same round.
func (r *GrowResult) within(base GrowResult) {
	if base.OthersRate > 0 {
		r.OthersRatio = r.OthersRate / base.OthersRate
	}
	r.OthersP99Ratio, r.MovedP99Ratio = ratio(r.OthersP99, base.OthersP99), ratio(r.MovedP99, base.MovedP99)
	r.MovedP50Extra, r.MovedP99Extra = r.MovedP50-base.MovedP50, r.MovedP99-base.MovedP99
}

// growReport is the --grow comparison.
type growReport struct {
	Grow         string `json:"grow"`
	From         int    `json:"from_partitions"`
	To           int    `json:"to_partitions"`
	Partitioning string `json:"partitioning"`
	Sessions     int    `json:"sessions"`
	// Moved is how many sessions the growth moves; Checked how many the
	// consumer checks, the moved ones included (see classChecked).
	Moved    int           `json:"moved_sessions"`
	Checked  int           `json:"checked_sessions"`
	Rate     int           `json:"msgs_per_s"`
	Duration time.Duration `json:"send_duration_ns"`
	GrowAt   time.Duration `json:"grow_at_ns"`
	Work     time.Duration `json:"work_ns"`
	Where    string        `json:"where"`
	Rounds   int           `json:"rounds"`
	// Results has one entry per arm: with several rounds, the median of
	// each figure over the rounds (its ratios and extras each taken within
	// a round), the most waiting, and the sums of violations, overlaps,
	// losses and duplicates.
	Results []GrowResult `json:"results"`
}

// medianGrow combines the rounds' results per arm (see Results).
func medianGrow(rounds [][]GrowResult) []GrowResult {
	out := make([]GrowResult, len(rounds[0]))
	for i := range out {
		var rates, ratios, p99r, movedR []float64
		var op99, p50, p99, p50x, p99x, longest, learned, took []time.Duration
		var released, parked []int64
		x := GrowResult{Arm: rounds[0][i].Arm, Finished: true}
		for _, rs := range rounds {
			r := rs[i]
			rates, ratios, p99r, movedR = append(rates, r.OthersRate), append(ratios, r.OthersRatio), append(p99r, r.OthersP99Ratio), append(movedR, r.MovedP99Ratio)
			op99, p50, p99 = append(op99, r.OthersP99), append(p50, r.MovedP50), append(p99, r.MovedP99)
			p50x, p99x = append(p50x, r.MovedP50Extra), append(p99x, r.MovedP99Extra)
			longest, learned, took = append(longest, r.LongestWait), append(learned, r.Learned), append(took, r.GrowTook)
			released, parked = append(released, r.MovedReleased), append(parked, r.MovedParked)
			x.PeakWaiting = max(x.PeakWaiting, r.PeakWaiting)
			x.Violations, x.Overlaps, x.Lost, x.Duplicates = x.Violations+r.Violations, x.Overlaps+r.Overlaps, x.Lost+r.Lost, x.Duplicates+r.Duplicates
			x.Finished = x.Finished && r.Finished
			x.Elapsed += r.Elapsed
		}
		x.OthersRate, x.OthersRatio, x.OthersP99Ratio, x.MovedP99Ratio = median(rates), median(ratios), median(p99r), median(movedR)
		x.OthersP99, x.MovedP50, x.MovedP99 = median(op99), median(p50), median(p99)
		x.MovedP50Extra, x.MovedP99Extra = median(p50x), median(p99x)
		x.LongestWait, x.Learned, x.GrowTook = median(longest), median(learned), median(took)
		x.MovedReleased, x.MovedParked = median(released), median(parked)
		out[i] = x
	}
	return out
}

// minGrowRatio is the target of issue #34: the other sessions keep at
// least this share of their throughput without growth.
const minGrowRatio = 0.9

func (r growReport) print(w io.Writer) {
	fmt.Fprintf(w, "lanes-lab bench --grow %s (%s): %s, %d moved, %d checked in all; %d msg/s for %v, grown at %v, work %v, %s\n",
		r.Grow, r.Partitioning, cli.Count(r.Sessions, "session"), r.Moved, r.Checked, r.Rate, r.Duration, r.GrowAt, r.Work, r.Where)
	if r.Rounds > 1 {
		fmt.Fprintf(w, "medians of %d rounds (each ratio and extra taken within its round); counts of violations and losses are the sums\n", r.Rounds)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tothers msg/s\t÷ no growth\tothers p99\tmoved p50\tmoved p99\tmoved p99 extra\twaits released\tlongest wait\tviolations\toverlaps\tlost\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t\n", x.Arm, x.OthersRate, x.OthersRatio,
			FormatDuration(x.OthersP99), FormatDuration(x.MovedP50), FormatDuration(x.MovedP99), signed(x.MovedP99Extra),
			x.MovedReleased, FormatDuration(x.LongestWait), x.Violations, x.Overlaps, x.Lost)
	}
	tw.Flush()
	g := r.Results[1]
	fmt.Fprintf(w, "\ngrowth: others %.2f of no-growth throughput, p99 %.2f× no growth; moved sessions p50 %s, p99 %s (%.2f× no growth); %d waits released, longest %v, at most %d waiting at once\n",
		g.OthersRatio, g.OthersP99Ratio, signed(g.MovedP50Extra), signed(g.MovedP99Extra), g.MovedP99Ratio,
		g.MovedReleased, FormatDuration(g.LongestWait), g.PeakWaiting)
	fmt.Fprintf(w, "the producer placed a record on a new partition %s after the growth began (the partitions' creation took %s)\n",
		FormatDuration(g.Learned), FormatDuration(g.GrowTook))
	for _, t := range r.targets() {
		mark := "met"
		if !t.ok {
			mark = "NOT met"
		}
		fmt.Fprintf(w, "target %-62s %s\n", t.what+":", mark)
	}
}

// signed formats an extra latency with its sign.
func signed(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "−" + FormatDuration(-d)
	}
	return "+" + FormatDuration(d)
}

// targets: the others keep their throughput through a growth; order and
// loss hold in every run.
func (r growReport) targets() []stuckTarget {
	clean := true
	for _, x := range r.Results {
		clean = clean && x.Violations == 0 && x.Overlaps == 0 && x.Lost == 0
	}
	return []stuckTarget{
		{fmt.Sprintf("growth: others' throughput ≥ %.1f× no growth", minGrowRatio), r.Results[1].OthersRatio >= minGrowRatio},
		{"every run: no order violation, no overlap, nothing lost", clean},
	}
}

// verdict fails on broken order, an overlap or a loss in either arm
// (always a bug); the throughput target is printed, not enforced.
func (r growReport) verdict() error {
	var errs []error
	for _, x := range r.Results {
		if x.Violations+x.Overlaps+x.Lost > 0 {
			errs = append(errs, fmt.Errorf("bench --grow, %s: %s, %s, %d lost",
				x.Arm, cli.Count(x.Violations, "order violation"), cli.Count(x.Overlaps, "overlapping call"), x.Lost))
		}
	}
	return errors.Join(errs...)
}
