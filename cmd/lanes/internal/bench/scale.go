package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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
		return fmt.Errorf("--scale %s: %d members for %d partitions: a member beyond the partition count gets none", spec, counts[len(counts)-1], w.Partitions)
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
}

// runScale grows one group through spec.counts member processes on a
// preloaded topic, and reports the group's throughput and settle time at
// each count.
func (b *bench) runScale(ctx context.Context, w workload, spec scaleSpec, stdout io.Writer) error {
	topic := b.prefix + "-scale"
	if err := cli.CreateTopics(ctx, b.broker, 30*time.Second, int32(w.Partitions), topic); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.broker.DeleteTopics(dctx, topic)
	}()
	perMember := float64(spec.pool) / spec.work.Seconds()
	total := 0
	for _, n := range spec.counts {
		total += int(float64(n) * perMember * (spec.window + 10*time.Second).Seconds())
	}
	fmt.Fprintf(b.stderr, "scale: preloading %d messages of %d sessions into %d partitions\n", total, w.Sessions, w.Partitions)
	if err := b.preloadScale(ctx, topic, w.Sessions, total); err != nil {
		return err
	}
	adm, err := b.broker.Client()
	if err != nil {
		return err
	}
	defer adm.Close()
	g := &memberGroup{group: topic + "-g", env: []string{envMember + "=1", envBrokers + "=" + strings.Join(b.brokers, ","),
		envGroup + "=" + topic + "-g", envTopic + "=" + topic, envWork + "=" + spec.work.String(), envPool + "=" + strconv.Itoa(spec.pool)},
		owned: map[int]int{}, changed: make(chan struct{})}
	defer g.stop()
	var steps []ScaleStep
	for _, n := range spec.counts {
		began := time.Now()
		for len(g.procs) < n {
			if err := g.spawn(); err != nil {
				return err
			}
		}
		if err := g.waitSettled(ctx, w.Partitions, 2*time.Minute); err != nil {
			return fmt.Errorf("%d members: %w", n, err)
		}
		st := ScaleStep{Members: n, Settle: time.Since(began), Bound: float64(n) * perMember}
		rate, err := committedRate(ctx, kadm.NewClient(adm), g.group, topic, spec.window)
		if err != nil {
			return fmt.Errorf("%d members: %w", n, err)
		}
		st.Rate = rate
		if len(steps) > 0 && steps[0].Rate > 0 {
			st.Speedup = rate / steps[0].Rate
		} else {
			st.Speedup = 1
		}
		fmt.Fprintf(b.stderr, "%d members: settled in %v, %.0f msg/s (%.2f× one member; the pools allow %.0f)\n",
			n, st.Settle.Round(10*time.Millisecond), st.Rate, st.Speedup, st.Bound)
		steps = append(steps, st)
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

// preloadScale writes n messages round robin over sessions, keyed by
// session.
func (b *bench) preloadScale(ctx context.Context, topic string, sessions, n int) error {
	cl, err := b.broker.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	var first error
	for i := range n {
		s := "s" + strconv.Itoa(i%sessions)
		cl.Produce(ctx, &kgo.Record{Key: []byte(s), Value: []byte(s + "|" + strconv.Itoa(i/sessions))}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	if first != nil {
		return fmt.Errorf("preload: %w", first)
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
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

// memberGroup is the member processes of a --scale run and what they own.
type memberGroup struct {
	group string
	env   []string
	procs []*exec.Cmd
	stdin []io.WriteCloser
	wg    sync.WaitGroup

	mu      sync.Mutex
	owned   map[int]int // member index → partitions it reports owning
	exited  int         // members whose output ended (they exited)
	changed chan struct{}
}

// spawn starts one more member process.
func (g *memberGroup) spawn() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("scale: find this program to run members: %w", err)
	}
	cmd := exec.Command(self, "bench")
	cmd.Env = append(os.Environ(), g.env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("scale: start a member: %w", err)
	}
	i := len(g.procs)
	g.procs, g.stdin = append(g.procs, cmd), append(g.stdin, in)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "partitions "); ok {
				v, _ := strconv.Atoi(n)
				g.note(func() { g.owned[i] = v })
			}
		}
		g.note(func() { g.exited++ })
	}()
	return nil
}

// note applies f under the lock and wakes waitSettled.
func (g *memberGroup) note(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
	close(g.changed)
	g.changed = make(chan struct{})
}

// waitSettled waits until every member owns partitions and all of them
// are owned.
func (g *memberGroup) waitSettled(ctx context.Context, partitions int, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		sum, all, ch, exited := 0, len(g.owned) == len(g.procs), g.changed, g.exited
		for _, n := range g.owned {
			sum += n
			all = all && n > 0
		}
		g.mu.Unlock()
		if exited > 0 {
			return fmt.Errorf("%d member process(es) exited (their error is above)", exited)
		}
		if all && sum == partitions {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("the group did not settle within %v: members own %d of %d partitions", limit, sum, partitions)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop closes every member's standard input and waits for them to exit.
func (g *memberGroup) stop() {
	for _, in := range g.stdin {
		_ = in.Close()
	}
	g.wg.Wait() // their output read to its end, before Wait closes it
	for _, p := range g.procs {
		_ = p.Wait()
	}
}
