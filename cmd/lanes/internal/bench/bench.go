package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/lanestest"
)

// finish checks a workload, sizes it and names it.
func (w *workload) finish() error {
	switch {
	case w.Mode != "closed" && w.Mode != "open":
		return fmt.Errorf("--mode %q: want closed or open", w.Mode)
	case w.Sessions < 1:
		return fmt.Errorf("--sessions %d: need at least 1", w.Sessions)
	case w.Messages < 0:
		return fmt.Errorf("--messages %d: must not be negative", w.Messages)
	case w.Transient < 0 || w.Transient >= 1:
		return fmt.Errorf("--transient %v: want a probability in [0, 1)", w.Transient)
	case w.Transient > 0 && w.RetryWait <= 0:
		return fmt.Errorf("--retry-wait %v: must be positive with --transient", w.RetryWait)
	case w.Mode == "open" && w.Rate < 1:
		return fmt.Errorf("--rate %d: open mode needs at least 1 message per second", w.Rate)
	case w.Mode == "open" && w.Duration <= 0:
		return fmt.Errorf("--duration %v: open mode needs a positive duration", w.Duration)
	}
	if w.Mode == "open" {
		w.Messages = int(float64(w.Rate) * w.Duration.Seconds())
	} else if w.Messages == 0 {
		w.Messages = 100 * w.Sessions
		if w.Work > 0 {
			w.Messages = min(100_000, w.Sessions*max(1, int(500*time.Millisecond/w.Work)))
		}
	}
	if w.Messages < 1 {
		return errors.New("the workload has no messages: raise --messages, or --rate × --duration")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d sess", w.Mode, w.Sessions)
	if w.Mode == "open" {
		fmt.Fprintf(&b, " %d/s", w.Rate)
	}
	if w.Zipf > 0 {
		fmt.Fprintf(&b, " zipf %g", w.Zipf)
	}
	if w.Work == 0 {
		b.WriteString(" work 0")
	} else {
		fmt.Fprintf(&b, " work %v", w.Work)
	}
	if w.Transient > 0 {
		fmt.Fprintf(&b, " %g%% fail %v wait", w.Transient*100, w.RetryWait)
	}
	w.Name = b.String()
	return nil
}

// openWorkload is the one open workload of a comparison (--grow,
// --control, --status-page) on partitions: base's --sessions, and --rate
// and --duration when given (default 5,000 msg/s for 10 s); work is
// --work's text, one duration when given (default 1 ms); flag names the
// comparison in an error.
func openWorkload(base workload, given map[string]bool, work, flag string, partitions int) (workload, error) {
	w := base
	w.Mode, w.Partitions = "open", partitions
	if !given["rate"] {
		w.Rate = 5_000
	}
	if !given["duration"] {
		w.Duration = 10 * time.Second
	}
	w.Work = time.Millisecond
	if given["work"] {
		var err error
		if w.Work, err = time.ParseDuration(strings.TrimSpace(work)); err != nil || w.Work < 0 {
			return w, fmt.Errorf("--work %q: with --%s, want one duration such as 1ms", work, flag)
		}
	}
	return w, w.finish()
}

// defaultSuite covers the throughput-against-work curve and every row of
// the targets table, sized to finish in under two minutes on two cores.
func defaultSuite(partitions int) []workload {
	closed := func(sessions, messages int, work time.Duration) workload {
		return workload{Mode: "closed", Sessions: sessions, Messages: messages, Work: work, Partitions: partitions}
	}
	ws := []workload{
		closed(1000, 100_000, 0), // as the consumer's Go benchmark: 100 per session
		closed(1000, 100_000, 100*time.Microsecond),
		closed(1000, 100_000, time.Millisecond),
		closed(1000, 40_000, 5*time.Millisecond),
		closed(1000, 20_000, 10*time.Millisecond),
		closed(1000, 5_000, 100*time.Millisecond),
	}
	zipf := closed(1000, 10_000, time.Millisecond)
	zipf.Zipf = 1.1
	fail := closed(10, 50_000, 0)
	fail.Transient, fail.RetryWait = 0.10, 2*time.Millisecond
	open := workload{Mode: "open", Sessions: 1000, Rate: 50_000, Duration: 2 * time.Second, Partitions: partitions}
	ws = append(ws, zipf, fail, open)
	for i := range ws {
		if err := ws[i].finish(); err != nil {
			panic(err) // the suite is fixed
		}
	}
	return ws
}

var allConsumers = []string{consLanes, consRaw, consMin, consCeil, consPart, consPool}

// consumersFor drops raw polling where it would not be the limit: with
// handler work or failures it handles one record at a time.
// poolFor is the key-pool baseline's workers on w: --pool, or by default
// as many as sessions up to 1,000 (the concurrency a hand-rolled pool
// would be given).
func (c benchConfig) poolFor(w workload) int {
	if c.pool > 0 {
		return c.pool
	}
	return min(w.Sessions, 1000)
}

func (c benchConfig) consumersFor(w workload) []string {
	var out []string
	for _, name := range c.consumers {
		zeroWork := w.Work == 0 && w.Transient == 0
		if (name == consRaw || name == consMin) && !zeroWork || name == consCeil && w.Mode != "closed" {
			continue // raw polling and minimal are the limits at zero work only
		}
		out = append(out, name)
	}
	return out
}

// runRounds runs the suite --rounds times, round after round (every
// workload through every consumer, then again), so that a drift of the
// machine's speed hits every consumer alike; one slice of results per
// round.
func (b *bench) runRounds(ctx context.Context) ([][]Result, error) {
	cfg := b.cfg
	per := 0
	for _, w := range cfg.workloads {
		per += len(cfg.consumersFor(w))
	}
	var rounds [][]Result
	done := 0
	for round := range cfg.rounds {
		var results []Result
		for i, w := range cfg.workloads {
			where := fmt.Sprintf("workload %d/%d", i+1, len(cfg.workloads))
			if cfg.rounds > 1 {
				where = fmt.Sprintf("round %d/%d, %s", round+1, cfg.rounds, where)
			}
			fmt.Fprintf(b.stderr, "%s: %s (%s)\n", where, w.Name, cli.Count(w.Messages, "message"))
			// every round's topics are its own: one deleted in a round is
			// not created again in the next
			rs, err := b.runWorkload(ctx, w, round*len(cfg.workloads)+i, cfg.rounds*per, done)
			results, done = append(results, rs...), done+len(rs)
			if err != nil {
				return nil, err
			}
		}
		rounds = append(rounds, results)
	}
	return rounds, nil
}

// Run runs "lanes-lab bench": every workload through every consumer, in one process, on
// one broker, and reports them side by side.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if IsMember() {
		if code := MemberMain(os.Stdin, stdout, stderr); code != 0 {
			return errors.New("bench member failed")
		}
		return nil
	}
	cfg, err := parseBench(args, stdout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	b := &bench{cfg: cfg, stderr: stderr, prefix: fmt.Sprintf("lanes-bench-%d", time.Now().UnixNano())}
	if cfg.brokers == "" {
		if b.broker, err = lanestest.NewBroker(int32(cfg.partitions)); err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		b.where = "embedded broker (kfake, in process)"
	} else {
		b.broker = lanestest.ConnectBroker(strings.Split(cfg.brokers, ","), cfg.opts...)
		b.where = "brokers " + cfg.brokers
	}
	defer b.broker.Close()
	b.brokers = b.broker.Addrs()
	if cfg.stuck != nil {
		return b.runStuck(ctx, cfg.workloads[0], *cfg.stuck, stdout)
	}
	if cfg.grow != nil {
		return b.runGrow(ctx, cfg.workloads[0], *cfg.grow, stdout)
	}
	if cfg.control != nil {
		return b.runControl(ctx, cfg.workloads[0], *cfg.control, stdout)
	}
	if cfg.unordered {
		return b.runUnordered(ctx, stdout)
	}
	if cfg.statusPage != nil {
		return b.runStatusPage(ctx, cfg.workloads[0], *cfg.statusPage, stdout)
	}
	if cfg.transactions != nil {
		return b.runTransactions(ctx, cfg.workloads[0], *cfg.transactions, stdout)
	}
	if cfg.scale != nil {
		return b.runScale(ctx, cfg.workloads[0], *cfg.scale, stdout)
	}
	start := time.Now()
	sleeps := measureSleeps(cfg.workloads)
	rounds, err := b.runRounds(ctx)
	if err != nil {
		return err
	}
	rep := newBenchReport(cfg, b.where, rounds, time.Since(start))
	rep.Sleeps = sleeps
	if cfg.json {
		err = rep.writeJSON(stdout)
	} else {
		rep.print(stdout)
	}
	if err != nil {
		return err
	}
	if cfg.plots != "" {
		if _, err := rep.plot(cfg.plots); err != nil {
			return err
		}
	}
	if cfg.docs != "" {
		if err := rep.writeDocs(cfg.docs); err != nil {
			return err
		}
	}
	return rep.verdict()
}
