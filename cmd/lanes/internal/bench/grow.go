package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// growSpec is --grow FROM:TO: a topic made with FROM partitions and grown
// to TO halfway through the sending, with the producer's partitioner
// (--partitioning).
type growSpec struct {
	from, to int
	text     string
	part     producer.Partitioning
	scheme   hashring.Scheme
	partName string // as given: kafka or jump
}

func parseGrowSpec(s string) (growSpec, error) {
	a, b, ok := strings.Cut(s, ":")
	from, errA := strconv.Atoi(strings.TrimSpace(a))
	to, errB := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case !ok || errA != nil || errB != nil:
		return growSpec{}, fmt.Errorf("--grow %q: want FROM:TO, two partition counts such as 4:12", s)
	case from < 1:
		return growSpec{}, fmt.Errorf("--grow %s: FROM %d: a topic has at least 1 partition", s, from)
	case to <= from:
		return growSpec{}, fmt.Errorf("--grow %s: TO must be more than FROM (Kafka adds partitions to a topic, never removes them)", s)
	}
	return growSpec{from: from, to: to, text: s}, nil
}

// visited is the set of flags given on the command line.
func visited(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// parseGrow sets c up for a --grow run from the flags fs parsed: base
// holds the workload flags' values, work --work's.
func (c *benchConfig) parseGrow(spec, partitioning string, fs *flag.FlagSet, base workload, work string) error {
	g, err := parseGrowSpec(spec)
	if err != nil {
		return err
	}
	switch partitioning {
	case "kafka":
		g.part, g.scheme = producer.PartitionKafka, hashring.SchemeKafka
	case "jump":
		g.part, g.scheme = producer.PartitionJump, hashring.SchemeJump
	default:
		return fmt.Errorf("--partitioning %q: want kafka or jump", partitioning)
	}
	g.partName = partitioning
	given := visited(fs)
	if given["partitions"] {
		return errors.New("--partitions: not used with --grow (its topic has FROM partitions, then TO)")
	}
	for _, name := range []string{"mode", "skew", "messages", "transient", "retry-wait", "consumers", "pool", "plots", "docs", "stuck"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --grow (it sends --rate msg/s for --duration to lanes alone, round robin over --sessions)", name)
		}
	}
	w, err := openWorkload(base, given, work, "grow", g.from)
	if err != nil {
		return err
	}
	cls := classify(sessionNames(w.Sessions), g)
	switch moved := cls.count(classMoved); {
	case moved == 0:
		return fmt.Errorf("--grow %s: none of the %s moves from %d to %d partitions: raise --sessions", spec, cli.Count(w.Sessions, "session"), g.from, g.to)
	case moved == w.Sessions:
		return fmt.Errorf("--grow %s: every one of the %s moves: no other session to measure; raise --sessions", spec, cli.Count(w.Sessions, "session"))
	}
	c.grow, c.workloads = &g, []workload{w}
	return nil
}

// The clients' metadata ages in a --grow run, in both arms: franz-go's
// default MetadataMaxAge is 5 minutes, and the producer places a session
// by the partition count it last learned. As integration/growth_test.go.
var (
	growProducerMeta = []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(250 * time.Millisecond)}
	growConsumerMeta = []kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(500 * time.Millisecond)}
)

// growArms are the two runs of a round: the topic never grown, and grown.
var growArms = []string{"no growth", "growth"}

// runGrow runs the --grow comparison (--rounds times, the two arms of a
// round one after the other) and prints it.
func (b *bench) runGrow(ctx context.Context, w workload, g growSpec, stdout io.Writer) error {
	rounds := max(b.cfg.rounds, 1)
	cls := classify(sessionNames(w.Sessions), g)
	fmt.Fprintf(b.stderr, "grow: %s, %d of them moved from %d to %d partitions (%s), %d checked in all; %d msg/s for %v, the growth at %v, work %v, %s, %s\n",
		cli.Count(w.Sessions, "session"), cls.count(classMoved), g.from, g.to, g.partName, cls.count(classMoved)+cls.count(classChecked),
		w.Rate, w.Duration, w.Duration/2, w.Work, cli.Count(rounds, "round"), b.where)
	var all [][]GrowResult
	for round := range rounds {
		var rs []GrowResult
		for i, arm := range growArms {
			n := round*len(growArms) + i
			label := fmt.Sprintf("[%d/%d] %-9s", n+1, rounds*len(growArms), arm)
			r, err := b.growRun(ctx, w, g, cls, i == 1, n, label)
			if err != nil {
				return err
			}
			if len(rs) > 0 {
				r.within(rs[0])
			} else {
				r.OthersRatio, r.OthersP99Ratio, r.MovedP99Ratio = 1, 1, 1
			}
			learned := ""
			if i == 1 {
				learned = fmt.Sprintf("; the producer placed on a new partition after %v", FormatDuration(r.Learned))
			}
			fmt.Fprintf(b.stderr, "%s others %6.0f msg/s (%.2f), p99 %v; moved p50 %v, p99 %v (%.2f×); %d waits released, longest %v%s\n",
				label, r.OthersRate, r.OthersRatio, FormatDuration(r.OthersP99), FormatDuration(r.MovedP50), FormatDuration(r.MovedP99),
				r.MovedP99Ratio, r.MovedReleased, FormatDuration(r.LongestWait), learned)
			rs = append(rs, r)
		}
		all = append(all, rs)
	}
	rep := growReport{Grow: g.text, From: g.from, To: g.to, Partitioning: g.partName, Sessions: w.Sessions,
		Moved: cls.count(classMoved), Checked: cls.count(classMoved) + cls.count(classChecked),
		Rate: w.Rate, Duration: w.Duration, GrowAt: w.Duration / 2, Work: w.Work, Where: b.where, Rounds: rounds,
		Results: medianGrow(all)}
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}

// growRun runs one arm: a fresh topic of FROM partitions and group, one
// lanes consumer, the workload sent at its rate while it consumes (the
// topic grown to TO halfway when grows), then until every message is
// accounted for or the cap passes.
func (b *bench) growRun(ctx context.Context, w workload, g growSpec, cls classes, grows bool, i int, label string) (GrowResult, error) {
	arm := growArms[map[bool]int{false: 0, true: 1}[grows]]
	topic := fmt.Sprintf("%s-grow-%d", b.prefix, i)
	topics := []string{topic, topic + "-dlq"}
	if err := b.makeTopics(ctx, int32(g.from), topics...); err != nil {
		return GrowResult{}, err
	}
	defer b.dropTopics(topics...)
	s := newGrowSide(w, g, cls)
	cfg := consumer.Config{Brokers: b.brokers, Group: topic + "-g", Topics: []string{topic}, DeadLetterTopic: topic + "-dlq",
		ClientOptions: append(b.broker.Opts(), growConsumerMeta...)}
	c, err := consumer.New(cfg, s.l.Handler("bench", consumer.HandlerFunc(s.handle)))
	if err != nil {
		return GrowResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx) }()
	stopRun := func() error { stop(); return <-errc }
	if err := waitReady(ctx, c, time.Minute); err != nil {
		_ = stopRun()
		return GrowResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	p, err := producer.New(producer.Config{Brokers: b.brokers, Topic: topic, Partitioning: g.part,
		ClientOptions: append(b.broker.Opts(), growProducerMeta...)})
	if err != nil {
		_ = stopRun()
		return GrowResult{}, fmt.Errorf("%s: producer: %w", arm, err)
	}
	defer p.Close()
	s.start(time.Now())
	sent := make(chan error, 1)
	go func() { sent <- s.send(rctx, p) }()
	grown := make(chan error, 1)
	if grows {
		go func() { grown <- b.growTopic(rctx, topic, g.to, s.growAt) }()
	} else {
		grown <- nil
	}
	var took time.Duration
	watch := &growWatch{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	capAt := time.Now().Add(w.Duration + b.cfg.maxRun + time.Minute)
	sending, growing, tty := true, true, cli.IsTTY(b.stderr)
	lastPrint := time.Now()
	var runErr error
	for runErr == nil && (sending || growing || s.l.Accounted() < w.Messages) && time.Now().Before(capAt) {
		select {
		case err := <-sent:
			sending, runErr = false, err
		case err := <-grown:
			growing, runErr = false, err
			if grows && err == nil {
				took = time.Since(s.growAt)
			}
		case err := <-errc:
			errc <- err
			runErr = fmt.Errorf("consumer stopped: %v", err)
		case <-ctx.Done():
			runErr = ctx.Err()
		case now := <-tick.C:
			watch.sample(c.Stats())
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				cli.ProgressLine(b.stderr, tty, fmt.Sprintf("%s %d/%d accounted for", label, s.l.Accounted(), w.Messages))
			}
		}
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	st := c.Stats()
	watch.sample(st)
	if err := stopRun(); err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	if runErr != nil {
		return GrowResult{}, fmt.Errorf("%s: %w", arm, runErr)
	}
	if n := s.l.Accounted(); n < w.Messages {
		fmt.Fprintf(b.stderr, "%s capped after %v: %d of %s accounted for\n", label,
			time.Since(s.began).Round(time.Second), n, cli.Count(w.Messages, "message"))
	}
	r := s.result(arm, b.stderr)
	r.MovedReleased, r.MovedParked = st.MovedReleased, st.MovedParked
	r.LongestWait, r.PeakWaiting, r.GrowTook = watch.longest, watch.waiting, took
	if !grows {
		r.Learned = 0 // no partition to learn of
	} else if r.Learned < 0 {
		return r, fmt.Errorf("%s: no record reached a partition past the first %d: the producer never learned the new count, nothing was measured", arm, g.from)
	}
	return r, nil
}

// growTopic grows topic to n partitions at the time at.
func (b *bench) growTopic(ctx context.Context, topic string, n int, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	cl, err := b.broker.Client()
	if err != nil {
		return fmt.Errorf("grow %s: %w", topic, err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).UpdatePartitions(ctx, n, topic)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("grow %s to %d partitions: %w", topic, n, err)
	}
	return nil
}

// growWatch samples the consumer's growth figures during a run: the
// longest wait of a moved session, and the most sessions waiting at once.
type growWatch struct {
	longest time.Duration
	waiting int
}

func (w *growWatch) sample(st consumer.Stats) {
	for _, g := range st.Growing {
		w.longest, w.waiting = max(w.longest, g.OldestWait), max(w.waiting, g.Waiting)
	}
}
