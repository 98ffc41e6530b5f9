package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// --unordered: the zero-work rate of lanes on a topic of OrderNone (every
// record its own lane) against raw polling, the suite's limit at zero
// work, and lanes with session order, all three reading one preloaded
// topic (runWorkload), round after round.

// unorderedConsumers are the runs of an --unordered round, in order.
var unorderedConsumers = []string{consRaw, consLanes, consNone}

// orderOf says how each of them orders a topic's records.
var orderOf = map[string]string{consRaw: "partition (poll loop)", consLanes: "session", consNone: "none"}

// unorderedPerSession is the default backlog of an --unordered run, per
// session: 500,000 messages for the default 1,000 sessions. At a million
// messages a second and more, a run of the suite's 100,000 lasts under a
// tenth of a second, its rate mostly the consumer's start.
const unorderedPerSession = 500

// parseUnordered sets c up for an --unordered run from the flags fs
// parsed: base holds --sessions and --messages (0: unorderedPerSession
// per session).
func (c *benchConfig) parseUnordered(fs *flag.FlagSet, base workload) error {
	given := visited(fs)
	for _, name := range []string{"mode", "skew", "work", "rate", "duration", "transient", "retry-wait", "consumers", "pool", "plots", "docs",
		"stuck", "grow", "scale"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --unordered (it reads one preloaded topic of --messages over --sessions, with zero work)", name)
		}
	}
	w := workload{Mode: "closed", Sessions: base.Sessions, Messages: base.Messages, Partitions: c.partitions}
	if !given["messages"] {
		w.Messages = unorderedPerSession * w.Sessions
	}
	if err := w.finish(); err != nil {
		return err
	}
	c.unordered, c.workloads, c.consumers = true, []workload{w}, unorderedConsumers
	return nil
}

// UnorderedResult is one consumer's figures in an --unordered run.
type UnorderedResult struct {
	Consumer string `json:"consumer"`
	Order    string `json:"order"`
	// Wall is messages ÷ the time from the consumer's start to its last
	// message; Steady between 10 % and 90 % of them handled (see Result).
	Wall   float64 `json:"wall_msgs_per_s"`
	Steady float64 `json:"steady_msgs_per_s"`
	// OfRaw and SteadyOfRaw are Wall and Steady ÷ raw polling's, in the
	// same round; OfLanes is Wall ÷ lanes with session order's.
	OfRaw          float64 `json:"wall_of_raw"`
	SteadyOfRaw    float64 `json:"steady_of_raw"`
	OfLanes        float64 `json:"wall_of_lanes"`
	AllocsPerMsg   float64 `json:"allocs_per_msg"`
	PeakGoroutines int     `json:"peak_goroutines"`
	// Violations: order violations and overlapping calls (of lanes-unordered,
	// messages handled twice only); Finished: every message handled in
	// every round.
	Violations int64 `json:"violations"`
	Finished   bool  `json:"finished"`
}

// unorderedReport is the --unordered comparison.
type unorderedReport struct {
	Workload   string        `json:"workload"`
	Sessions   int           `json:"sessions"`
	Messages   int           `json:"messages"`
	Partitions int           `json:"partitions"`
	Where      string        `json:"where"`
	Rounds     int           `json:"rounds"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	// Results has one entry per consumer: the medians over the rounds of
	// each rate and ratio (each ratio taken within its round), the highest
	// goroutine count, violations summed.
	Results []UnorderedResult `json:"results"`
}

// runUnordered runs the --unordered comparison (--rounds times) and
// prints it.
func (b *bench) runUnordered(ctx context.Context, stdout io.Writer) error {
	w := b.cfg.workloads[0]
	fmt.Fprintf(b.stderr, "unordered: %s, %s, zero work, %s, %s; raw polling, lanes with session order, lanes with OrderNone; %s\n",
		cli.Count(w.Messages, "message"), cli.Count(w.Sessions, "session"), cli.Count(w.Partitions, "partition"),
		cli.Count(b.cfg.rounds, "round"), b.where)
	start := time.Now()
	rounds, err := b.runRounds(ctx)
	if err != nil {
		return err
	}
	rep := newUnorderedReport(w, b.where, rounds, time.Since(start))
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}

// newUnorderedReport combines the rounds: one result per consumer, its
// ratios taken within each round.
func newUnorderedReport(w workload, where string, rounds [][]Result, elapsed time.Duration) unorderedReport {
	rep := unorderedReport{Workload: w.Name, Sessions: w.Sessions, Messages: w.Messages, Partitions: w.Partitions,
		Where: where, Rounds: len(rounds), Elapsed: elapsed}
	ofRaw, steadyOfRaw, ofLanes := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for _, rs := range rounds {
		round := &benchReport{Workloads: []workload{w}, Results: rs}
		raw, lanes := round.find(w.Name, consRaw), round.find(w.Name, consLanes)
		for _, r := range rs {
			if raw != nil && raw.Wall > 0 && raw.Steady > 0 {
				ofRaw[r.Consumer] = append(ofRaw[r.Consumer], r.Wall/raw.Wall)
				steadyOfRaw[r.Consumer] = append(steadyOfRaw[r.Consumer], r.Steady/raw.Steady)
			}
			if lanes != nil && lanes.Wall > 0 {
				ofLanes[r.Consumer] = append(ofLanes[r.Consumer], r.Wall/lanes.Wall)
			}
		}
	}
	for _, x := range medianOf(rounds) {
		rep.Results = append(rep.Results, UnorderedResult{Consumer: x.Consumer, Order: orderOf[x.Consumer], Wall: x.Wall, Steady: x.Steady,
			OfRaw: median(ofRaw[x.Consumer]), SteadyOfRaw: median(steadyOfRaw[x.Consumer]), OfLanes: median(ofLanes[x.Consumer]),
			AllocsPerMsg: x.AllocsPerMsg, PeakGoroutines: x.PeakGoroutines, Violations: x.Violations + x.Overlaps, Finished: x.Finished})
	}
	return rep
}

// find is the result of consumer name (nil when it did not run).
func (r unorderedReport) find(name string) *UnorderedResult {
	for i := range r.Results {
		if r.Results[i].Consumer == name {
			return &r.Results[i]
		}
	}
	return nil
}

func (r unorderedReport) print(w io.Writer) {
	fmt.Fprintf(w, "lanes-lab bench --unordered: %s, %s; %s\n", r.Workload, cli.Count(r.Partitions, "partition"), r.Where)
	if r.Rounds > 1 {
		fmt.Fprintf(w, "medians of %d rounds (each ratio taken within its round); violations summed\n", r.Rounds)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "consumer\torder\twall msg/s\t÷ raw\tsteady msg/s\t÷ raw\t÷ lanes (wall)\tallocs/msg\tgoroutines\tviolations\t")
	for _, x := range r.Results {
		wall := fmtRate(x.Wall)
		if !x.Finished {
			wall += "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%.2f\t%.2f\t%.1f\t%d\t%d\t\n", x.Consumer, x.Order, wall, x.OfRaw, fmtRate(x.Steady),
			x.SteadyOfRaw, x.OfLanes, x.AllocsPerMsg, x.PeakGoroutines, x.Violations)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nwall: from the consumer's start to its last message; steady: between 10 % and 90 % of the messages handled.")
	fmt.Fprintln(w, "violations: order violations and overlapping calls; of lanes-unordered, which keeps no order, messages handled twice. * capped: not finished.")
	if u, l := r.find(consNone), r.find(consLanes); u != nil && l != nil {
		fmt.Fprintf(w, "\nlanes, OrderNone: %s msg/s, %.2f of raw polling's wall rate (steady %.2f), %.2f× lanes with session order (itself %.2f of raw polling's)\n",
			fmtRate(u.Wall), u.OfRaw, u.SteadyOfRaw, u.OfLanes, l.OfRaw)
	}
}

// verdict fails when a message was handled twice or a consumer with
// order broke it (always a bug); a capped run is marked, as in the suite.
func (r unorderedReport) verdict() error {
	var errs []error
	for _, x := range r.Results {
		if x.Violations > 0 {
			errs = append(errs, fmt.Errorf("bench --unordered, %s: %s", x.Consumer, cli.Count(int(x.Violations), "violation")))
		}
	}
	return errors.Join(errs...)
}
