package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// transactionsSpec is --transactions EVERY,...: after a run whose handler
// produces its output through a plain producer, one run per interval with
// the transactional mode on, that interval its CommitInterval, the
// handler adding the same output with Message.Output.
type transactionsSpec struct {
	every []time.Duration
	text  string
}

func parseTransactionsSpec(s string) (transactionsSpec, error) {
	spec := transactionsSpec{text: s}
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return transactionsSpec{}, fmt.Errorf("--transactions %q: want commit intervals, positive durations such as 100ms or 10ms,100ms,1s", s)
		}
		if slices.Contains(spec.every, d) {
			return transactionsSpec{}, fmt.Errorf("--transactions %s: %v twice", s, d)
		}
		spec.every = append(spec.every, d)
	}
	return spec, nil
}

// parseTransactions sets c up for a --transactions run from the flags fs
// parsed: base holds the workload flags' values, work --work's.
func (c *benchConfig) parseTransactions(spec string, fs *flag.FlagSet, base workload, work string) error {
	ts, err := parseTransactionsSpec(spec)
	if err != nil {
		return err
	}
	given := visited(fs)
	for _, name := range []string{"status-page", "stuck", "grow", "control", "unordered", "scale"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --transactions (one comparison at a time)", name)
		}
	}
	for _, name := range []string{"mode", "skew", "messages", "transient", "retry-wait", "consumers", "pool", "plots", "docs",
		"park", "max-buffered", "partitioning"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --transactions (it sends --rate msg/s for --duration to lanes alone, round robin over --sessions)", name)
		}
	}
	w, err := openWorkload(base, given, work, "transactions", c.partitions)
	if err != nil {
		return err
	}
	c.transactions, c.workloads = &ts, []workload{w}
	return nil
}

// txArm names a run: the baseline (every 0), or the transactional mode
// at a commit interval.
func txArm(every time.Duration) string {
	if every == 0 {
		return "no transactions"
	}
	return "transactions every " + every.String()
}

// runTransactions runs the --transactions comparison (--rounds times, the
// runs of a round one after the other: the baseline, then each interval)
// and prints it.
func (b *bench) runTransactions(ctx context.Context, w workload, spec transactionsSpec, stdout io.Writer) error {
	rounds := max(b.cfg.rounds, 1)
	every := append([]time.Duration{0}, spec.every...)
	fmt.Fprintf(b.stderr, "transactions: %s, %d msg/s for %v, work %v and one output each, %s; transactional at commit intervals %s, "+
		"against the output produced synchronously by a plain producer; %s, %s\n",
		cli.Count(w.Sessions, "session"), w.Rate, w.Duration, w.Work, cli.Count(w.Partitions, "partition"),
		spec.text, cli.Count(rounds, "round"), b.where)
	width := 0
	for _, e := range every {
		width = max(width, len(txArm(e)))
	}
	var all [][]TxResult
	for round := range rounds {
		var rs []TxResult
		for i, e := range every {
			n := round*len(every) + i
			label := fmt.Sprintf("[%d/%d] %-*s", n+1, rounds*len(every), width, txArm(e))
			r, err := b.txRun(ctx, w, e, n, label)
			if err != nil {
				return err
			}
			if len(rs) > 0 {
				r.within(rs[0])
			} else {
				r.Ratio, r.P99Ratio, r.HandledP99Ratio = 1, 1, 1
			}
			fmt.Fprintf(b.stderr, "%s %6.0f msg/s (%.2f), p99 visible %s (%.2f×), handled %s (%.2f×); %s, %d aborted, mean end %s; %d redelivered\n",
				label, r.Rate, r.Ratio, FormatDuration(r.P99), r.P99Ratio, FormatDuration(r.HandledP99), r.HandledP99Ratio,
				cli.Count(int(r.Committed), "transaction"), r.Aborted, FormatDuration(r.MeanEnd), r.Redelivered)
			rs = append(rs, r)
		}
		all = append(all, rs)
	}
	rep := txReport{Transactions: spec.text, Sessions: w.Sessions, Rate: w.Rate, Duration: w.Duration, Work: w.Work,
		Partitions: w.Partitions, Where: b.where, Rounds: rounds, Results: medianTx(all)}
	if rounds > 1 {
		rep.PerRound = all
	}
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}
