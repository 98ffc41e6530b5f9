package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchConfig is what lanes bench was asked for: its flags, parsed and
// checked (parseBench), and the workloads they name.
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
