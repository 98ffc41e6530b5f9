package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scaleSpec is --scale: the member counts to grow through, one group.
type scaleSpec struct {
	counts []int
	pool   int           // concurrent handler calls per member
	work   time.Duration // one call
	window time.Duration // measured at each count, once settled
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("--scale %q: want growing member counts such as 1,2,4,8", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseScale sets c up for a --scale run from the flags fs parsed.
func (c *benchConfig) parseScale(spec string, fs *flag.FlagSet, sessions int, work string, window time.Duration) error {
	counts, err := parseCounts(spec)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"mode", "skew", "messages", "rate", "transient", "retry-wait", "consumers", "stuck", "docs"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --scale", name)
		}
	}
	sp := scaleSpec{counts: counts, pool: 25, work: 20 * time.Millisecond, window: 15 * time.Second}
	if given["pool"] {
		sp.pool = c.pool
	}
	if given["work"] {
		if sp.work, err = time.ParseDuration(strings.TrimSpace(work)); err != nil || sp.work <= 0 {
			return fmt.Errorf("--work %q: with --scale, want one positive duration such as 20ms", work)
		}
	}
	if given["duration"] {
		sp.window = window
	}
	w := workload{Mode: "closed", Sessions: 4000, Partitions: 48}
	if given["sessions"] {
		w.Sessions = sessions
	}
	if given["partitions"] {
		w.Partitions = c.partitions
	}
	if counts[len(counts)-1] > w.Partitions {
		return fmt.Errorf("--scale %s: %s for %s: a member beyond the partition count gets none", spec, cli.Count(counts[len(counts)-1], "member"), cli.Count(w.Partitions, "partition"))
	}
	c.scale, c.workloads = &sp, []workload{w}
	return nil
}

// ScaleStep is one member count's figures.
type ScaleStep struct {
	Members int `json:"members"`
	// Settle is from starting the new members to every member owning
	// partitions, all of them owned (0 for the first count: the group's
	// first assignment, in Join).
	Settle time.Duration `json:"settle_ns"`
	Join   time.Duration `json:"first_assignment_ns,omitempty"`
	// Rate is the group's committed offsets' growth over the window, in
	// messages per second; Speedup it ÷ the first count's.
	Rate    float64 `json:"msgs_per_s"`
	Speedup float64 `json:"speedup"`
	// Bound is what the members' pools allow: members × pool ÷ work.
	Bound float64 `json:"bound_msgs_per_s"`
	// The open sweep: Offered msg/s (80 % of Bound) sent for the window,
	// OpenRate handled, and the latencies of those messages (record
	// timestamp to handled; bucket bounds, 10 % apart).
	Offered  float64       `json:"offered_msgs_per_s"`
	OpenRate float64       `json:"open_handled_msgs_per_s"`
	P50      time.Duration `json:"open_p50_ns"`
	P99      time.Duration `json:"open_p99_ns"`
}

// runScale runs two sweeps, each growing one group through spec.counts
// member processes: on a preloaded topic, the group's throughput and the
// settle time of each membership change; then on a topic sent to at 80 %
// of what the members' pools allow, the latency (record timestamp to
// handled) at each count.
func (b *bench) runScale(ctx context.Context, w workload, spec scaleSpec, stdout io.Writer) error {
	adm, err := b.broker.Client()
	if err != nil {
		return err
	}
	defer adm.Close()
	steps, err := b.scaleSweep(ctx, w, spec, adm, false)
	if err != nil {
		return err
	}
	open, err := b.scaleSweep(ctx, w, spec, adm, true)
	if err != nil {
		return err
	}
	for i := range steps {
		steps[i].Offered, steps[i].OpenRate, steps[i].P50, steps[i].P99 = open[i].Offered, open[i].OpenRate, open[i].P50, open[i].P99
	}
	rep := scaleReport{Sessions: w.Sessions, Partitions: w.Partitions, Work: spec.work, Pool: spec.pool,
		Window: spec.window, Where: b.where, Steps: steps}
	if b.cfg.json {
		return writeJSON(stdout, rep)
	}
	rep.print(stdout)
	if b.cfg.plots != "" {
		return rep.plot(b.cfg.plots)
	}
	return nil
}

// scaleSweep grows a fresh group on a fresh topic through spec.counts
// members. Closed (open false): the topic is preloaded, and each count's
// rate is read from the group's commits. Open: the topic is sent to at 80 %
// of the count's bound during each window, and the members' latencies over
// it are summed.
func (b *bench) scaleSweep(ctx context.Context, w workload, spec scaleSpec, adm *kgo.Client, open bool) ([]ScaleStep, error) {
	topic := b.prefix + "-scale-closed"
	if open {
		topic = b.prefix + "-scale-open"
	}
	if err := cli.CreateTopics(ctx, b.broker, 30*time.Second, int32(w.Partitions), topic); err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.broker.DeleteTopics(dctx, topic)
	}()
	perMember := float64(spec.pool) / spec.work.Seconds()
	if !open {
		total := 0
		for _, n := range spec.counts {
			total += int(float64(n) * perMember * (spec.window + 10*time.Second).Seconds())
		}
		fmt.Fprintf(b.stderr, "scale: preloading %s of %s into %s\n", cli.Count(total, "message"), cli.Count(w.Sessions, "session"), cli.Count(w.Partitions, "partition"))
		w.Messages = total
		snd, err := newSender(b.broker, w, w.plan())
		if err != nil {
			return nil, err
		}
		err = snd.preload(ctx, topic)
		snd.close()
		if err != nil {
			return nil, err
		}
	}
	g := &memberGroup{group: topic + "-g", env: []string{envMember + "=1", envBrokers + "=" + strings.Join(b.brokers, ","),
		envGroup + "=" + topic + "-g", envTopic + "=" + topic, envWork + "=" + spec.work.String(), envPool + "=" + strconv.Itoa(spec.pool)},
		owned: map[int]int{}, lat: map[int][latBuckets]int64{}, changed: make(chan struct{})}
	defer g.stop()
	var steps []ScaleStep
	for _, n := range spec.counts {
		began := time.Now()
		for len(g.procs) < n {
			if err := g.spawn(); err != nil {
				return nil, err
			}
		}
		if err := g.waitSettled(ctx, w.Partitions, 2*time.Minute); err != nil {
			return nil, fmt.Errorf("%s: %w", cli.Count(n, "member"), err)
		}
		st := ScaleStep{Members: n, Settle: time.Since(began), Bound: float64(n) * perMember}
		var err error
		if open {
			err = b.openWindow(ctx, g, topic, w.Sessions, spec.window, &st)
		} else {
			st.Rate, err = committedRate(ctx, kadm.NewClient(adm), g.group, topic, spec.window)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cli.Count(n, "member"), err)
		}
		if open {
			fmt.Fprintf(b.stderr, "%s, %.0f msg/s offered: %.0f handled, p99 %v\n", cli.Count(n, "member"), st.Offered, st.OpenRate, st.P99)
		} else {
			st.Speedup = 1
			if len(steps) > 0 && steps[0].Rate > 0 {
				st.Speedup = st.Rate / steps[0].Rate
			}
			fmt.Fprintf(b.stderr, "%s: settled in %v, %.0f msg/s (%.2f× one member; the pools allow %.0f)\n",
				cli.Count(n, "member"), st.Settle.Round(10*time.Millisecond), st.Rate, st.Speedup, st.Bound)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// openWindow sends to topic at 80 % of st.Bound for window, round robin
// over sessions, then waits (at most 30 s) for the members to have handled
// what was sent, and sets st's offered and handled rates and latencies
// over the window's messages.
func (b *bench) openWindow(ctx context.Context, g *memberGroup, topic string, sessions int, window time.Duration, st *ScaleStep) error {
	st.Offered = 0.8 * st.Bound
	cl, err := b.broker.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := warmUp(ctx, g, cl, sessions); err != nil {
		return err
	}
	before := g.latencies()
	began := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	sent := 0
	for time.Since(began) < window {
		due := int(time.Since(began).Seconds() * st.Offered)
		for ; sent < due; sent++ {
			s := "s" + strconv.Itoa(sent%sessions)
			cl.Produce(ctx, &kgo.Record{Key: []byte(s), Value: []byte(s)}, nil)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	got, err := g.waitHandled(ctx, before, sent, 30*time.Second)
	if err != nil {
		return err
	}
	for i := range got {
		got[i] -= before[i]
	}
	st.OpenRate = float64(sumBuckets(got)) / window.Seconds()
	st.P50, st.P99 = latQuantile(got, 0.5), latQuantile(got, 0.99)
	return nil
}

// warmUp sends a message of every session through cl and waits until
// the members handled them: the producer knows the topic's partitions and
// their leaders, and the members are fetching, before a window is timed.
func warmUp(ctx context.Context, g *memberGroup, cl *kgo.Client, sessions int) error {
	before := g.latencies()
	recs := make([]*kgo.Record, sessions)
	for i := range recs {
		s := "s" + strconv.Itoa(i)
		recs[i] = &kgo.Record{Key: []byte(s), Value: []byte(s)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	_, err := g.waitHandled(ctx, before, sessions, 30*time.Second)
	return err
}

// waitHandled waits until the members handled n messages more than the
// counts before say, for at most limit (then it returns what they
// handled), and returns their counts.
func (g *memberGroup) waitHandled(ctx context.Context, before [latBuckets]int64, n int, limit time.Duration) ([latBuckets]int64, error) {
	deadline := time.Now().Add(limit)
	for {
		got := g.latencies()
		if sumBuckets(got)-sumBuckets(before) >= int64(n) || time.Now().After(deadline) {
			return got, nil
		}
		if err := g.waitChange(ctx); err != nil {
			return got, err
		}
	}
}

func sumBuckets(h [latBuckets]int64) int64 {
	var n int64
	for _, x := range h {
		n += x
	}
	return n
}

// latQuantile is the upper bound of the bucket holding quantile q of h.
func latQuantile(h [latBuckets]int64, q float64) time.Duration {
	n := sumBuckets(h)
	if n == 0 {
		return 0
	}
	want, seen := int64(math.Ceil(q*float64(n))), int64(0)
	for i, x := range h {
		if seen += x; seen >= want {
			return latUpper(i)
		}
	}
	return latUpper(latBuckets - 1)
}

// committedRate is the group's committed offsets' growth over window, in
// messages per second; it fails when the backlog ran out meanwhile (the
// rate would then be the backlog's, not the group's).
func committedRate(ctx context.Context, adm *kadm.Client, group, topic string, window time.Duration) (float64, error) {
	sum := func() (int64, error) {
		os, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return 0, fmt.Errorf("committed offsets of %s: %w", group, err)
		}
		var n int64
		os.Each(func(o kadm.OffsetResponse) { n += max(o.At, 0) })
		return n, nil
	}
	c0, err := sum()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-time.After(window): // the measuring window
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	c1, err := sum()
	if err != nil {
		return 0, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if c1 >= end {
		return 0, errors.New("the preloaded backlog ran out during the window: the rate would not be the group's")
	}
	return float64(c1-c0) / time.Since(t0).Seconds(), nil
}
