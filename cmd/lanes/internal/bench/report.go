package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// benchReport is what a lanes-lab bench run found, with where and how it ran.
type benchReport struct {
	Machine string        `json:"machine"`
	Command string        `json:"command"`
	Broker  string        `json:"broker"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Rounds is how many times the suite ran; with more than one, Results
	// and Targets are medians over the rounds (see newBenchReport).
	Rounds    int        `json:"rounds"`
	Workloads []workload `json:"workloads"`
	Results   []Result   `json:"results"`
	Targets   []target   `json:"targets,omitempty"`
	// Sleeps is how long the handler's simulated work really takes here:
	// the timer's granularity rounds short sleeps up.
	Sleeps []sleepCheck `json:"sleeps,omitempty"`
}

type sleepCheck struct {
	Work  time.Duration `json:"work_ns"`
	Slept time.Duration `json:"slept_ns"`
}

// measureSleeps times the handler work of every workload on this machine.
func measureSleeps(ws []workload) []sleepCheck {
	var out []sleepCheck
	for _, w := range ws {
		if w.Work <= 0 || slices.ContainsFunc(out, func(c sleepCheck) bool { return c.Work == w.Work }) {
			continue
		}
		n := max(3, min(50, int(100*time.Millisecond/w.Work)))
		start := time.Now()
		for range n {
			time.Sleep(w.Work)
		}
		out = append(out, sleepCheck{w.Work, time.Since(start) / time.Duration(n)})
	}
	return out
}

func (r *benchReport) sleepLine() string {
	if len(r.Sleeps) == 0 {
		return ""
	}
	parts := make([]string, len(r.Sleeps))
	for i, c := range r.Sleeps {
		parts[i] = fmt.Sprintf("%v → %s", c.Work, FormatDuration(c.Slept))
	}
	return "handler work as slept on this machine (time.Sleep): " + strings.Join(parts, ", ")
}

// target is one row of the consumer's performance targets, as measured.
// With several rounds each round measures it from its own results, and
// Value is the median of the rounds' values (Rounds).
type target struct {
	Measure  string    `json:"measure"`
	Target   string    `json:"target"`
	Measured string    `json:"measured"`
	Value    float64   `json:"value"`            // in the unit Measured shows (a ratio, or ms)
	Rounds   []float64 `json:"rounds,omitempty"` // each round's value, with more than one
	verb     string    // how Value prints, e.g. "%.2f"
}

// newTarget is a target measured once: its value, and detail (such as the
// rates it is a ratio of) after it.
func newTarget(measure, want, verb string, v float64, detail string) target {
	t := target{Measure: measure, Target: want, Value: v, verb: verb}
	t.Measured = t.format(v)
	if detail != "" {
		t.Measured += " (" + detail + ")"
	}
	return t
}

func (t target) format(v float64) string { return fmt.Sprintf(t.verb, v) }

// newBenchReport reports the rounds' results (one round's results each,
// its ratios not yet set): with one round as they are, with several the
// medians (see medianOf and medianTargets).
func newBenchReport(cfg benchConfig, where string, rounds [][]Result, elapsed time.Duration) *benchReport {
	r := &benchReport{Machine: machine(), Command: strings.TrimSpace("lanes-lab bench " + strings.Join(cfg.args, " ")),
		Broker: where, Elapsed: elapsed, Rounds: len(rounds), Workloads: cfg.workloads}
	var ts [][]target
	for _, rs := range rounds {
		round := &benchReport{Workloads: cfg.workloads, Results: rs}
		round.setRatios()
		ts = append(ts, round.targets())
	}
	r.Results, r.Targets = medianOf(rounds), medianTargets(ts)
	return r
}

// setRatios sets every result's Ratio and OfCeiling from the results of
// the same run (one round).
func (r *benchReport) setRatios() {
	for i := range r.Results {
		x := &r.Results[i]
		raw := r.find(x.Workload, consRaw)
		switch {
		case x.Bound > 0 && r.workload(x.Workload).Mode == "closed":
			x.Ratio, x.RatioTo = x.Active/x.Bound, "bound"
		case raw != nil && raw.Steady > 0 && r.workload(x.Workload).Mode == "closed":
			x.Ratio, x.RatioTo = x.Steady/raw.Steady, consRaw
		}
		if c := r.find(x.Workload, consCeil); c != nil && c.Steady > 0 {
			x.OfCeiling = x.Steady / c.Steady
		}
	}
}

func (r *benchReport) workload(name string) workload {
	for _, w := range r.Workloads {
		if w.Name == name {
			return w
		}
	}
	return workload{}
}

func (r *benchReport) find(workload, consumer string) *Result {
	for i := range r.Results {
		if r.Results[i].Workload == workload && r.Results[i].Consumer == consumer {
			return &r.Results[i]
		}
	}
	return nil
}

// findWhere returns the named consumer's result on the first workload that
// matches.
func (r *benchReport) findWhere(consumer string, match func(workload) bool) *Result {
	for _, w := range r.Workloads {
		if match(w) {
			if x := r.find(w.Name, consumer); x != nil {
				return x
			}
		}
	}
	return nil
}

// targets measures the rows of the consumer's targets table that this run
// has workloads for.
func (r *benchReport) targets() []target {
	var ts []target
	closed := func(sessions int, work time.Duration, zipf, fail float64) func(workload) bool {
		return func(w workload) bool {
			return w.Mode == "closed" && w.Sessions == sessions && w.Work == work && w.Zipf == zipf && w.Transient == fail
		}
	}
	// At zero work, wall rates: the steady rate of raw polling is iterating
	// franz-go's buffer, which no hand-off to other goroutines can match.
	zero := closed(1000, 0, 0, 0)
	if l, raw := r.findWhere(consLanes, zero), r.findWhere(consRaw, zero); l != nil && raw != nil && raw.Wall > 0 {
		ts = append(ts, newTarget("zero work, 1,000 sessions: lanes ÷ raw polling, wall", "≥ 0.5", "%.2f",
			l.Wall/raw.Wall, fmt.Sprintf("%s vs %s msg/s", fmtRate(l.Wall), fmtRate(raw.Wall))))
	}
	if l, m := r.findWhere(consLanes, zero), r.findWhere(consMin, zero); l != nil && m != nil && m.Wall > 0 {
		ts = append(ts, newTarget("zero work, 1,000 sessions: lanes ÷ the minimal per-key dispatcher, wall", "≥ 0.75", "%.2f",
			l.Wall/m.Wall, fmt.Sprintf("%s vs %s msg/s", fmtRate(l.Wall), fmtRate(m.Wall))))
	}
	if l := r.findWhere(consLanes, closed(1000, 5*time.Millisecond, 0, 0)); l != nil {
		ts = append(ts, newTarget("5 ms work, 1,000 sessions: ÷ bound", "≥ 0.9", "%.2f", l.Ratio, ""))
	}
	if l := r.findWhere(consLanes, closed(10, 0, 0, 0.10)); l != nil {
		ts = append(ts, newTarget("10 sessions, 10 % transient failures, 2 ms first retry wait: ÷ the bound the waits allow", "≥ 0.9",
			"%.2f", l.Ratio, fmtRate(l.Steady)+" msg/s"))
	}
	open := func(w workload) bool { return w.Mode == "open" && w.Rate == 50_000 && w.Work == 0 && w.Transient == 0 }
	if l, raw := r.findWhere(consLanes, open), r.findWhere(consRaw, open); l != nil && raw != nil && raw.P99 > 0 {
		ts = append(ts, newTarget("open mode, 50,000 msg/s, zero work: p99 ÷ raw polling's p99", "≤ 1.3×", "%.1f×",
			float64(l.P99)/float64(raw.P99), FormatDuration(l.P99)+" vs "+FormatDuration(raw.P99)))
	}
	if l := r.findWhere(consLanes, open); l != nil && l.P50 > 0 {
		ts = append(ts, newTarget("open mode, 50,000 msg/s, zero work: lanes p50", "≤ 2 ms", "%.2f ms", float64(l.P50)/1e6, ""))
	}
	zipf := func(w workload) bool { return w.Mode == "closed" && w.Zipf == 1.1 && w.Work == time.Millisecond }
	if l := r.findWhere(consLanes, zipf); l != nil {
		ts = append(ts, newTarget("Zipf s = 1.1, 1 ms work: ÷ busiest-session bound", "≥ 0.95", "%.2f", l.Ratio, ""))
	}
	return ts
}

// print writes the table, one row per consumer and workload.
func (r *benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "lanes-lab bench: %s; %s\n", r.Broker, r.Machine)
	if note := r.roundsNote(); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range r.rows() {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprint(w, benchFootnote)
	if line := r.sleepLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	if len(r.Targets) > 0 {
		if r.Rounds > 1 {
			fmt.Fprintf(w, "\ntargets (each measured within its round; the median of the %s)\n", cli.Count(r.Rounds, "round"))
		} else {
			fmt.Fprintf(w, "\ntargets\n")
		}
		for _, t := range r.Targets {
			fmt.Fprintf(w, "  %-90s %-20s %s\n", t.Measure, t.Target, t.Measured)
		}
	}
	fmt.Fprintf(w, "\n%s in %s\n", r.runs(), r.Elapsed.Round(time.Second))
}

const benchFootnote = `
steady: between 10 % and 90 % of the messages handled; wall: from the consumer's start (closed) or the first send (open).
ratio: msgs/s from the first attempt's start to the last message handled ÷ the bound per-session order allows (the busiest
  session's work and retry waits, nominal), or steady ÷ raw polling's steady at zero work.
÷ ceiling: steady ÷ the ceiling's steady: the same handler, sessions and order run from memory by a goroutine per session,
  with no Kafka (closed mode): what this machine can do for the workload. minimal: a per-key dispatcher with no offset
  tracking and no commits, the limit of the dispatch itself.
latency: closed mode from the run's start (time in the backlog); open mode from each message's intended send time.
viol: order violations and overlapping calls, every message checked. allocs/msg and heap are the whole process's, broker included.
* capped by --max-run before every message was handled: rates over what was handled.
`

var benchHeader = []string{"workload", "consumer", "steady msg/s", "wall msg/s", "ratio", "÷ ceiling", "p50", "p99", "p99.9", "max",
	"viol", "allocs/msg", "peak heap", "goroutines"}

func (r *benchReport) rows() [][]string {
	rows := [][]string{benchHeader}
	for _, x := range r.Results {
		wall := fmtRate(x.Wall)
		if !x.Finished {
			wall += "*"
		}
		ratio := "—"
		if x.RatioTo != "" {
			ratio = fmt.Sprintf("%.2f %s", x.Ratio, strings.TrimSuffix(x.RatioTo, "-poll"))
		}
		ceil := "—"
		if x.OfCeiling > 0 {
			ceil = fmt.Sprintf("%.2f", x.OfCeiling)
		}
		rows = append(rows, []string{x.Workload, x.Consumer, fmtRate(x.Steady), wall, ratio, ceil,
			FormatDuration(x.P50), FormatDuration(x.P99), FormatDuration(x.P999), FormatDuration(x.Max),
			fmt.Sprint(x.Violations + x.Overlaps), fmt.Sprintf("%.1f", x.AllocsPerMsg),
			fmt.Sprintf("%.0f MiB", float64(x.PeakHeap)/(1<<20)), fmt.Sprint(x.PeakGoroutines)})
	}
	return rows
}

func (r *benchReport) writeJSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// runs says how many consumer runs the report is made of.
func (r *benchReport) runs() string {
	if r.Rounds <= 1 {
		return cli.Count(len(r.Results), "run")
	}
	return fmt.Sprintf("%s (%s of %d)", cli.Count(r.Rounds*len(r.Results), "run"), cli.Count(r.Rounds, "round"), len(r.Results))
}

// verdict fails the run when any consumer broke per-session order (in any
// round: the violations and overlaps are the rounds' sums).
func (r *benchReport) verdict() error {
	var errs []error
	for _, x := range r.Results {
		if x.Violations+x.Overlaps > 0 {
			errs = append(errs, fmt.Errorf("%s on %s: %s, %s",
				x.Consumer, x.Workload, cli.Count(x.Violations, "order violation"), cli.Count(x.Overlaps, "overlapping call")))
		}
	}
	return errors.Join(errs...)
}

func fmtRate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

// FormatDuration prints a latency for the tables: µs, ms or s, "—" for
// none.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// machine describes where the run happened.
func machine() string {
	cpu := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v) + ", "
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%s%d CPUs (GOMAXPROCS %d), %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOOS, runtime.GOARCH, runtime.Version())
}
