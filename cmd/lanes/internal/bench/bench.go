package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
)

type benchConfig struct {
	brokers    string
	partitions int
	consumers  []string
	pool       int
	maxRun     time.Duration
	timeout    time.Duration
	json       bool
	plots      string
	docs       string
	workloads  []workload
	args       []string        // as given, for the record
	opts       []kgo.Opt       // TLS, SASL (--tls-*, --sasl-*)
	stuck      *stuckSpec      // --stuck: the stuck-sessions comparison instead of the workloads
	grow       *growSpec       // --grow: the partition-growth comparison instead of the workloads
	rounds     int             // --rounds: of the suite or the --stuck or --grow comparison
	scale      *scaleSpec      // --scale: the scaling run instead of the workloads
	control    *controlSpec    // --control: the per-session control comparison instead of the workloads
	unordered  bool            // --unordered: lanes with OrderNone against raw polling instead of the workloads
	statusPage *statusPageSpec // --status-page: lanes with its status page loaded against none instead of the workloads
	// --transactions: the transactional mode at commit intervals against
	// a plain producer's output instead of the workloads
	transactions *transactionsSpec
}

// workloadFlags are the flags that describe one workload; given none,
// bench runs the default suite.
var workloadFlags = []string{"mode", "sessions", "skew", "work", "messages", "rate", "duration", "transient", "retry-wait"}

// help is "lanes-lab bench -h".
var help = cli.Help{
	Prog: "lanes-lab",
	Name: "bench",
	Args: "[flags]",
	About: "Compares lanes with raw franz-go polling, one goroutine per partition and a key-hash worker pool, in " +
		"one run, on closed (a preloaded backlog) and open (a fixed send rate) workloads: messages per second, " +
		"ratio to the bound, latency, order violations, allocations, heap and goroutines, as a table, --json, " +
		"--plots DIR or --docs FILE. Without a workload flag it runs the default suite; --stuck compares " +
		"in-lane retries with parking, --grow the one-time cost of adding partitions to a consumed topic, " +
		"--scale grows one group of member processes, --control measures the other sessions beside paused and " +
		"rate-limited ones, --unordered lanes with OrderNone against raw polling, --status-page lanes with its " +
		"status page loaded every so often against none, --transactions the transactional (exactly-once) mode " +
		"at commit intervals against a plain producer's outputs. It runs on an embedded " +
		"broker unless --brokers names a real cluster.",
	Docs: "benchmarks.md",
}

func parseBench(args []string, stdout io.Writer) (benchConfig, error) {
	c := benchConfig{args: args}
	fs := help.FlagSet()
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated brokers of a real cluster, `host:port`,... (default: an embedded broker)")
	fs.IntVar(&c.partitions, "partitions", 12, "partitions of each workload's topic")
	consumers := fs.String("consumers", strings.Join(allConsumers, ","), "comma-separated `NAMES` of the consumers to compare")
	fs.IntVar(&c.pool, "pool", 0, "workers of the key-pool baseline (0: the workload's sessions, at most 1,000)")
	fs.DurationVar(&c.maxRun, "max-run", 3*time.Second, "cap on one consumer's run (after the sending, in open mode); slower consumers are measured over what they handled")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of the table")
	fs.StringVar(&c.plots, "plots", "", "write PNG plots into `DIR`")
	fs.StringVar(&c.docs, "docs", "", "regenerate the lanes-lab bench section of this Markdown `FILE` (plots beside it, in bench/)")
	mode := fs.String("mode", "closed", "the `MODE`: closed (a preloaded backlog) or open (a fixed send rate)")
	sessions := fs.Int("sessions", 1000, "sessions (keys)")
	skew := fs.String("skew", "uniform", "the key `SKEW`: uniform, or zipf:S with S > 1")
	work := fs.String("work", "0,1ms", "handler work per message, comma-separated `DURATIONS`; one workload each")
	messages := fs.Int("messages", 0, "closed mode: messages per workload (0: sized to the work)")
	rate := fs.Int("rate", 50000, "open mode: messages per second")
	duration := fs.Duration("duration", 2*time.Second, "open mode: how long to send")
	transient := fs.Float64("transient", 0, "probability that a handler attempt fails transiently")
	retryWait := fs.Duration("retry-wait", 2*time.Millisecond, "wait after a first failure (doubling after each further one)")
	scale := fs.String("scale", "", "member `COUNTS` such as 1,2,4,8: one group of that many member processes in turn, on a preloaded topic; throughput and settle time at each (--work, --pool: calls at once per member, --duration: the window)")
	stuck := fs.String("stuck", "", "`PCT:DURATION` (e.g. 1%:10s): that share of the sessions fails for that long; compares in-lane retries with parking, for the other sessions")
	grow := fs.String("grow", "", "`FROM:TO` (e.g. 4:12): lanes on a topic of FROM partitions grown to TO halfway through the sending, against one never grown: the moved sessions' extra latency and the other sessions' throughput (--rate default 5000, --duration 10s, --work 1ms)")
	partitioning := fs.String("partitioning", "kafka", "with --grow: the producer's `PARTITIONER`, kafka (PartitionKafka, murmur2 as Apache Kafka's) or jump (PartitionJump)")
	control := fs.String("control", "", "`PCT` (e.g. 1%): lanes with that share of the sessions controlled, half paused for the whole run and half limited to 2 records/s, against none controlled, per-session control on in both: the other sessions' throughput and p99 (--rate default 5000, --duration 10s, --work 1ms)")
	park := fs.Bool("park", false, "with --control: parking on in both runs, so a paused session's records are parked out of its partition's way")
	buffered := fs.Int("max-buffered", 0, "with --control: the consumer's MaxBufferedRecords in both runs (0: a partition's whole share of the run, so that the records held behind a paused session never reach it)")
	statusPage := fs.String("status-page", "", "`INTERVALS` (e.g. 1s,100ms): lanes with its status page (GET status on HealthHandler, on a loopback HTTP server) loaded that often while the workload is sent, one run per interval, against a run with no page: throughput and p99, the page's load time (--rate default 5000, --duration 10s, --work 1ms)")
	transactions := fs.String("transactions", "", "commit `INTERVALS` (e.g. 10ms,100ms,1s): lanes whose handler outputs one record per message, in the transactional mode at each interval, one run each, against a run producing it through a plain producer: throughput and p99 to the output read at read_committed, transactions committed and aborted, their mean end time (--rate default 5000, --duration 10s, --work 1ms)")
	unordered := fs.Bool("unordered", false, "the zero-work rate of lanes on a topic of OrderNone (every record its own lane) against raw polling and lanes with session order, on one preloaded topic (--sessions, --messages: default 500 per session, --partitions)")
	fs.IntVar(&c.rounds, "rounds", 1, "run the workloads (or the --stuck, --grow, --control, --unordered, --status-page or --transactions comparison) this many times, round after round, and report the medians, each ratio taken within its round (timing figures are noisy on a shared machine); not with --scale")
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, help, args, stdout); err != nil {
		return c, err
	}
	var err error
	if c.opts, err = sec.ClientOpts(c.brokers != ""); err != nil {
		return c, err
	}
	c.consumers = strings.Split(*consumers, ",")
	for _, name := range c.consumers {
		if runners[name] == nil {
			return c, fmt.Errorf("--consumers: unknown consumer %q (have %s)", name, strings.Join(allConsumers, ", "))
		}
	}
	switch {
	case c.partitions < 1:
		return c, fmt.Errorf("--partitions %d: need at least 1", c.partitions)
	case c.pool < 0:
		return c, fmt.Errorf("--pool %d: need at least 1 (or 0 for the default)", c.pool)
	case c.maxRun <= 0:
		return c, fmt.Errorf("--max-run %v: want a positive duration", c.maxRun)
	case c.timeout <= 0:
		return c, fmt.Errorf("--timeout %v: want a positive duration", c.timeout)
	case c.rounds < 1:
		return c, fmt.Errorf("--rounds %d: need at least 1", c.rounds)
	case c.rounds > 1 && *scale != "":
		return c, fmt.Errorf("--rounds %d: not used with --scale (a scaling run is one pass; drop --rounds)", c.rounds)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || slices.Contains(workloadFlags, f.Name) })
	if *scale != "" && *grow != "" {
		return c, errors.New("--scale: not used with --grow (one comparison at a time)")
	}
	if *grow == "" && visited(fs)["partitioning"] {
		return c, errors.New("--partitioning: used only with --grow")
	}
	switch {
	case *transactions != "":
		return c, c.parseTransactions(*transactions, fs, workload{Sessions: *sessions, Rate: *rate, Duration: *duration}, *work)
	case *statusPage != "":
		return c, c.parseStatusPage(*statusPage, fs, workload{Sessions: *sessions, Rate: *rate, Duration: *duration}, *work)
	case *control != "" && *unordered:
		return c, errors.New("--unordered: not used with --control (one comparison at a time)")
	case *control != "":
		return c, c.parseControl(*control, *park, *buffered, fs, workload{Sessions: *sessions, Rate: *rate, Duration: *duration}, *work)
	case *park:
		return c, errors.New("--park: used only with --control")
	case visited(fs)["max-buffered"]:
		return c, errors.New("--max-buffered: used only with --control")
	case *unordered:
		return c, c.parseUnordered(fs, workload{Sessions: *sessions, Messages: *messages})
	}
	if *scale != "" {
		return c, c.parseScale(*scale, fs, *sessions, *work, *duration)
	}
	if *grow != "" {
		return c, c.parseGrow(*grow, *partitioning, fs, workload{Sessions: *sessions, Rate: *rate, Duration: *duration}, *work)
	}
	if *stuck != "" {
		return c, c.parseStuck(*stuck, fs, workload{Sessions: *sessions, Rate: *rate, Duration: *duration,
			Partitions: c.partitions}, *work)
	}
	if !given {
		c.workloads = defaultSuite(c.partitions)
		return c, nil
	}
	base := workload{Mode: *mode, Sessions: *sessions, Messages: *messages, Rate: *rate, Duration: *duration,
		Transient: *transient, RetryWait: *retryWait, Partitions: c.partitions}
	if err := parseSkew(*skew, &base); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*work, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return c, fmt.Errorf("--work %q: want durations such as 0,100us,1ms", s)
		}
		w := base
		w.Work = d
		if err := w.finish(); err != nil {
			return c, err
		}
		c.workloads = append(c.workloads, w)
	}
	return c, nil
}

func parseSkew(s string, w *workload) error {
	if s == "uniform" {
		return nil
	}
	x, ok := strings.CutPrefix(s, "zipf:")
	v, err := strconv.ParseFloat(x, 64)
	if !ok || err != nil || v <= 1 {
		return fmt.Errorf("--skew %q: want uniform or zipf:S with S > 1 (e.g. zipf:1.1)", s)
	}
	w.Zipf = v
	return nil
}

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
