package demo

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

type demoConfig struct {
	brokers     string
	sessions    int
	messages    int
	partitions  int
	transient   float64
	permanent   float64
	work        time.Duration
	timeout     time.Duration
	trace       bool
	metricsAddr string
	baseline    time.Duration
	paced       time.Duration
	pacedRate   int
	dedup       string // "", memory, redis or postgres
	redisAddr   string
	postgresDSN string
	opts        []kgo.Opt // TLS, SASL (--tls-*, --sasl-*)
}

// help is "lanes-lab demo -h".
var help = cli.Help{
	Prog: "lanes-lab",
	Name: "demo",
	Args: "[flags]",
	About: "Runs a chat service end to end: a producer sends conversations over many sessions while a lanes " +
		"consumer with injected faults (transient, retried; permanent, dead-lettered) handles them, and every " +
		"message of every session is checked for order and loss. Then, for comparison, one goroutine per " +
		"partition handles the same topic, and a paced phase sends below capacity to measure latency. It runs " +
		"on an embedded broker unless --brokers names a real cluster, where it creates and deletes topics of its own.",
	Docs: "demo.md",
}

func parseDemo(args []string, stdout io.Writer) (demoConfig, error) {
	var c demoConfig
	fs := help.FlagSet()
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated brokers of a real cluster, `host:port`,... (default: an embedded broker)")
	fs.IntVar(&c.sessions, "sessions", 1000, "chat sessions")
	fs.IntVar(&c.messages, "messages", 50000, "messages in total, spread over the sessions")
	fs.IntVar(&c.partitions, "partitions", 12, "partitions of the demo topic")
	fs.Float64Var(&c.transient, "transient", 0.10, "probability that a handler attempt fails transiently (retried)")
	fs.Float64Var(&c.permanent, "permanent", 0.001, "probability that a message fails permanently (dead-lettered)")
	fs.DurationVar(&c.work, "work", time.Millisecond, "simulated handler work per message")
	fs.DurationVar(&c.timeout, "timeout", 3*time.Minute, "give up after this long")
	fs.DurationVar(&c.baseline, "baseline", 3*time.Second, "afterwards, measure one goroutine per partition on the same topic for this long (0: skip)")
	fs.DurationVar(&c.paced, "paced", 3*time.Second, "afterwards, send at --paced-rate for this long and report the latency at that pace (0: skip)")
	fs.IntVar(&c.pacedRate, "paced-rate", 5000, "messages per second of the paced phase (well below capacity)")
	fs.BoolVar(&c.trace, "trace", false, "record OpenTelemetry spans and print a few complete traces at the end")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at `host:port` while the demo runs (e.g. :9464)")
	fs.StringVar(&c.dedup, "dedup", "", "apply each message's effect once with a dedup `STORE` (memory, redis or postgres), across a crash and restart of the consumer")
	fs.StringVar(&c.redisAddr, "redis-addr", cli.EnvOr("LANES_REDIS_ADDR", "127.0.0.1:6379"), "Redis for --dedup redis, at `host:port` ($LANES_REDIS_ADDR when set)")
	fs.StringVar(&c.postgresDSN, "postgres-dsn", cli.EnvOr("LANES_POSTGRES_DSN", "postgres://127.0.0.1:5432/postgres"), "PostgreSQL for --dedup postgres, a `DSN` ($LANES_POSTGRES_DSN when set)")
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, help, args, stdout); err != nil {
		return c, err
	}
	var err error
	if c.opts, err = sec.ClientOpts(c.brokers != ""); err != nil {
		return c, err
	}
	switch {
	case c.sessions < 1:
		return c, fmt.Errorf("--sessions %d: need at least 1", c.sessions)
	case c.messages < c.sessions:
		return c, fmt.Errorf("--messages %d: need at least one per session (%d)", c.messages, c.sessions)
	case c.partitions < 1:
		return c, fmt.Errorf("--partitions %d: need at least 1", c.partitions)
	case c.transient < 0 || c.transient >= 1:
		return c, fmt.Errorf("--transient %v: want a probability in [0, 1)", c.transient)
	case c.permanent < 0 || c.permanent > 1:
		return c, fmt.Errorf("--permanent %v: want a probability in [0, 1]", c.permanent)
	case c.dedup != "" && c.dedup != "memory" && c.dedup != "redis" && c.dedup != "postgres":
		return c, fmt.Errorf("--dedup %q: want memory, redis or postgres", c.dedup)
	case c.work < 0:
		return c, fmt.Errorf("--work %v: must not be negative", c.work)
	case c.timeout <= 0:
		return c, fmt.Errorf("--timeout %v: want a positive duration", c.timeout)
	case c.baseline < 0:
		return c, fmt.Errorf("--baseline %v: must not be negative (0 skips it)", c.baseline)
	case c.paced < 0:
		return c, fmt.Errorf("--paced %v: must not be negative (0 skips it)", c.paced)
	case c.paced > 0 && (c.pacedRate < 1 || float64(c.pacedRate)*c.paced.Seconds() < 1):
		return c, fmt.Errorf("--paced-rate %d: the paced phase needs at least one message per second and one in all", c.pacedRate)
	}
	return c, nil
}

// Run runs a chat service end to end: a producer sends conversations
// across many sessions while a lanes consumer with injected faults handles
// them; every message of every session is checked for order and loss.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseDemo(args, stdout)
	if err != nil {
		return err
	}
	broker, where, topic, cleanup, err := demoTopics(ctx, cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	brokers := broker.Addrs()
	dlq := topic + "-dlq"
	fmt.Fprintf(stdout, "lanes-lab demo: %s, %s, %s, %s\n",
		cli.Count(cfg.sessions, "session"), cli.Count(cfg.messages, "message"), cli.Count(cfg.partitions, "partition"), where)
	fmt.Fprintf(stdout, "faults: %.1f%% transient per attempt, %.2f%% permanent per message; handler work %v\n\n",
		cfg.transient*100, cfg.permanent*100, cfg.work)

	obs, err := setupObserve(cfg, stdout)
	if err != nil {
		return err
	}
	defer obs.close()
	chk := newChecker(cfg)
	if cfg.trace {
		chk.forcePoison = map[string]bool{sessionName(1) + "|2": true} // so a printed trace shows a DLQ write
	}
	ccfg := consumer.Config{
		Brokers: brokers, Group: topic + "-group", Topics: []string{topic}, DeadLetterTopic: dlq,
		TracerProvider: tracerProvider(obs), TraceAsChild: cfg.trace, MeterProvider: meterProvider(obs),
		// Quick retries so a run takes seconds; the budget is large enough
		// that transient faults never exhaust it.
		Retry:         consumer.RetryPolicy{InitialInterval: 5 * time.Millisecond, MaxInterval: 100 * time.Millisecond, MaxAttempts: 25},
		ClientOptions: broker.Opts(),
	}
	consume, crash, err := consumers(ctx, cfg, ccfg, chk, broker, obs.serveHealth, stderr)
	if err != nil {
		return err
	}
	p, err := producer.New(producer.Config{Brokers: brokers, Topic: topic, ClientOptions: broker.Opts(),
		TracerProvider: tracerProvider(obs), MeterProvider: meterProvider(obs)})
	if err != nil {
		return err
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	consumed := make(chan error, 1)
	start := time.Now()
	go func() { consumed <- consume(runCtx) }()
	go sendConversations(runCtx, p, cfg, chk)

	prog := newProgress(stderr, chk, cfg.messages)
	finished := prog.until(runCtx, chk.complete(runCtx))
	elapsed := time.Since(start)
	cancel()
	runErr := <-consumed
	p.Close()
	prog.clear()
	if runErr != nil {
		fmt.Fprintln(stderr, "consumer:", runErr)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	inDLQ, err := lanestest.ReadDeadLetters(dctx, broker, dlq, chk.ledger)
	dcancel()
	if err != nil {
		fmt.Fprintln(stderr, "reading the DLQ:", err)
	}
	r := chk.report(elapsed, len(inDLQ), finished)
	if crash != nil {
		r.dedup = &dedupReport{store: cfg.dedup, rewoundTo: crash.rewoundTo, crashedAt: crash.crashedAt,
			skipped: crash.skipped(), effects: chk.duplicateEffects()}
	}
	if cfg.baseline > 0 && cfg.work > 0 {
		fmt.Fprintf(stderr, "measuring the baseline (one goroutine per partition) for %v...\n", cfg.baseline)
		if r.baseline, err = baselineRate(ctx, broker, topic, cfg.work, cfg.baseline); err != nil {
			fmt.Fprintln(stderr, "baseline:", err)
		}
	}
	if cfg.paced > 0 {
		fmt.Fprintf(stderr, "paced phase: %d msg/s for %v...\n", cfg.pacedRate, cfg.paced)
		pr, err := pacedPhase(ctx, broker, cfg, topic, stderr)
		if err != nil {
			fmt.Fprintln(stderr, err)
		}
		r.paced, r.pacedRate = &pr, cfg.pacedRate
	}
	r.print(stdout)
	if err := obs.printTraces(stdout, 3); err != nil {
		fmt.Fprintln(stderr, "printing traces:", err)
	}
	return r.verdict()
}

// consumers returns how the demo consumes: one consumer, or with --dedup a
// crash and restart (crash describes it afterwards).
func consumers(ctx context.Context, cfg demoConfig, ccfg consumer.Config, chk *checker, broker *lanestest.Broker,
	serve func(*consumer.Consumer), stderr io.Writer) (consume func(context.Context) error, crash *crashRun, err error) {
	if cfg.dedup == "" {
		c, err := consumer.New(ccfg, chk.handler())
		if err != nil {
			return nil, nil, err
		}
		serve(c)
		return c.Run, nil, nil
	}
	store, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	chk.dedup = true
	crash = &crashRun{broker: broker, cfg: ccfg, chk: chk, store: store, total: cfg.messages, serve: serve}
	return func(ctx context.Context) error {
		defer closeStore()
		return crash.run(ctx, stderr)
	}, crash, nil
}

// sendConversations sends every session's messages, interleaved across
// sessions, each session in order.
func sendConversations(ctx context.Context, p *producer.Producer, cfg demoConfig, chk *checker) {
	for seq := 0; ; seq++ {
		sent := false
		for s := 0; s < cfg.sessions; s++ {
			if seq >= chk.perSession(s) {
				continue
			}
			sent = true
			session := sessionName(s)
			value := strconv.Itoa(seq) + "|" + utterance(seq)
			p.SendAsync(ctx, session, []byte(value), func(r producer.Result, err error) {
				chk.acked(session, seq, r.EventID, err)
			}, producer.WithSequence(uint64(seq)))
		}
		if !sent || ctx.Err() != nil {
			return
		}
	}
}

func sessionName(i int) string { return fmt.Sprintf("chat-%05d", i) }

// A conversation: a booking and its correction come first, so every
// session checks that "make it Paris" is applied after "book ... London".
var script = []string{
	"book a flight to London",
	"make it Paris",
	"add a hotel for two nights",
	"actually make it three nights",
	"what is the total?",
	"pay with the card ending 4242",
	"send me the itinerary",
}

func utterance(seq int) string { return script[seq%len(script)] }

// demoTopics gives the demo its broker and a fresh topic (and its DLQ): an
// embedded kfake broker by default, or new topics on the given cluster.
func demoTopics(ctx context.Context, cfg demoConfig) (b *lanestest.Broker, where, topic string, cleanup func(), err error) {
	topic = fmt.Sprintf("lanes-demo-%d", time.Now().UnixNano())
	if cfg.brokers == "" {
		b, err := lanestest.NewBroker(int32(cfg.partitions), topic, topic+"-dlq")
		if err != nil {
			return nil, "", "", nil, fmt.Errorf("start the embedded broker: %w", err)
		}
		return b, "embedded broker (kfake)", topic, b.Close, nil
	}
	b = lanestest.ConnectBroker(strings.Split(cfg.brokers, ","), cfg.opts...)
	if err := cli.CreateTopics(ctx, b, 30*time.Second, int32(cfg.partitions), topic, topic+"-dlq"); err != nil {
		return nil, "", "", nil, err
	}
	cleanup = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.DeleteTopics(dctx, topic, topic+"-dlq")
	}
	return b, "brokers " + cfg.brokers, topic, cleanup, nil
}

// tracerProvider and meterProvider return nil (lanes' default: the global
// providers, no-ops here) unless the demo set its own up.
func tracerProvider(o *observe) trace.TracerProvider {
	if o.tp == nil {
		return nil
	}
	return o.tp
}

func meterProvider(o *observe) metric.MeterProvider {
	if o.mp == nil {
		return nil
	}
	return o.mp
}
