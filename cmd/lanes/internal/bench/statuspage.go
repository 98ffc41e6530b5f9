package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
)

// statusPageSpec is --status-page EVERY,...: after a run with no page,
// one run per interval with the member's status page (GET status on
// HealthHandler) loaded that often while the workload is sent.
type statusPageSpec struct {
	every []time.Duration
	text  string
}

func parseStatusPageSpec(s string) (statusPageSpec, error) {
	spec := statusPageSpec{text: s}
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return statusPageSpec{}, fmt.Errorf("--status-page %q: want how often the page is loaded, positive durations such as 1s or 1s,100ms", s)
		}
		if slices.Contains(spec.every, d) {
			return statusPageSpec{}, fmt.Errorf("--status-page %s: %v twice", s, d)
		}
		spec.every = append(spec.every, d)
	}
	return spec, nil
}

// parseStatusPage sets c up for a --status-page run from the flags fs
// parsed: base holds the workload flags' values, work --work's.
func (c *benchConfig) parseStatusPage(spec string, fs *flag.FlagSet, base workload, work string) error {
	sp, err := parseStatusPageSpec(spec)
	if err != nil {
		return err
	}
	given := visited(fs)
	for _, name := range []string{"stuck", "grow", "control", "unordered", "scale"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --status-page (one comparison at a time)", name)
		}
	}
	for _, name := range []string{"mode", "skew", "messages", "transient", "retry-wait", "consumers", "pool", "plots", "docs", "park", "max-buffered"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --status-page (it sends --rate msg/s for --duration to lanes alone, round robin over --sessions)", name)
		}
	}
	w, err := openWorkload(base, given, work, "status-page", c.partitions)
	if err != nil {
		return err
	}
	c.statusPage, c.workloads = &sp, []workload{w}
	return nil
}

// statusPageArm names a run: no page (every 0), or the page every so
// often.
func statusPageArm(every time.Duration) string {
	if every == 0 {
		return "no page"
	}
	return "page every " + every.String()
}

// runStatusPage runs the --status-page comparison (--rounds times, the
// runs of a round one after the other: no page, then each interval) and
// prints it.
func (b *bench) runStatusPage(ctx context.Context, w workload, spec statusPageSpec, stdout io.Writer) error {
	rounds := max(b.cfg.rounds, 1)
	every := append([]time.Duration{0}, spec.every...)
	fmt.Fprintf(b.stderr, "status page: %s, %d msg/s for %v, work %v, %s; the page (GET status) every %s while sending, against none; %s, %s\n",
		cli.Count(w.Sessions, "session"), w.Rate, w.Duration, w.Work, cli.Count(w.Partitions, "partition"),
		spec.text, cli.Count(rounds, "round"), b.where)
	width := 0
	for _, e := range every {
		width = max(width, len(statusPageArm(e)))
	}
	var all [][]StatusPageResult
	for round := range rounds {
		var rs []StatusPageResult
		for i, e := range every {
			n := round*len(every) + i
			label := fmt.Sprintf("[%d/%d] %-*s", n+1, rounds*len(every), width, statusPageArm(e))
			r, err := b.statusPageRun(ctx, w, e, n, label)
			if err != nil {
				return err
			}
			if len(rs) > 0 {
				r.within(rs[0])
			} else {
				r.Ratio, r.P99Ratio = 1, 1
			}
			fmt.Fprintf(b.stderr, "%s %6.0f msg/s (%.2f), p99 %s (%.2f×); %s, mean %s, slowest %s\n",
				label, r.Rate, r.Ratio, FormatDuration(r.P99), r.P99Ratio, cli.Count(r.Loads, "page load"),
				FormatDuration(r.MeanLoad), FormatDuration(r.SlowestLoad))
			rs = append(rs, r)
		}
		all = append(all, rs)
	}
	rep := statusPageReport{StatusPage: spec.text, Sessions: w.Sessions, Rate: w.Rate, Duration: w.Duration, Work: w.Work,
		Partitions: w.Partitions, Where: b.where, Rounds: rounds, Results: medianStatusPage(all)}
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}

// statusPageRun runs one arm: a fresh topic and group, one lanes
// consumer, and with every > 0 its HealthHandler on a loopback HTTP
// server; the workload sent at its rate while it consumes, the page
// loaded every so often while the sending lasts (pager), then until every
// message is accounted for or the cap passes. Neither arm reads Stats
// otherwise: the page is the only reader.
func (b *bench) statusPageRun(ctx context.Context, w workload, every time.Duration, i int, label string) (StatusPageResult, error) {
	arm := statusPageArm(every)
	topic := fmt.Sprintf("%s-status-%d", b.prefix, i)
	topics := []string{topic, topic + "-dlq"}
	if err := b.makeTopics(ctx, int32(w.Partitions), topics...); err != nil {
		return StatusPageResult{}, err
	}
	defer b.dropTopics(topics...)
	s := newControlSide(w, controlRoles{}) // no session controlled: every one measured
	c, err := consumer.New(consumer.Config{Brokers: b.brokers, Group: topic + "-g", Topics: []string{topic},
		DeadLetterTopic: topic + "-dlq", ClientOptions: b.broker.Opts()}, s.l.Handler("bench", consumer.HandlerFunc(s.handle)))
	if err != nil {
		return StatusPageResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx) }()
	stopRun := func() error { stop(); return <-errc }
	if err := waitReady(ctx, c, time.Minute); err != nil {
		_ = stopRun()
		return StatusPageResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	p, err := producer.New(producer.Config{Brokers: b.brokers, Topic: topic, ClientOptions: b.broker.Opts()})
	if err != nil {
		_ = stopRun()
		return StatusPageResult{}, fmt.Errorf("%s: producer: %w", arm, err)
	}
	defer p.Close()
	began := time.Now()
	s.began.Store(began.UnixNano())
	pg := &pager{every: every}
	paged := make(chan struct{})
	if every > 0 {
		srv := httptest.NewServer(c.HealthHandler())
		defer srv.Close()
		go func() { defer close(paged); pg.run(rctx, srv.URL+"/status", began.Add(w.Duration)) }()
	} else {
		close(paged)
	}
	sent := make(chan error, 1)
	go func() { sent <- sendPaced(rctx, p, s.l, s.names, w, began) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	capAt := time.Now().Add(w.Duration + b.cfg.maxRun + 30*time.Second)
	sending, tty := true, cli.IsTTY(b.stderr)
	lastPrint := time.Now()
	var runErr error
	for runErr == nil && (sending || s.l.Accounted() < w.Messages) && time.Now().Before(capAt) {
		select {
		case err := <-sent:
			sending, runErr = false, err
		case err := <-errc:
			errc <- err
			runErr = fmt.Errorf("consumer stopped: %v", err)
		case <-ctx.Done():
			runErr = ctx.Err()
		case now := <-tick.C:
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				cli.ProgressLine(b.stderr, tty, fmt.Sprintf("%s %d/%d accounted for, %s", label, s.l.Accounted(), w.Messages,
					cli.Count(pg.loads(), "page load")))
			}
		}
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	stop() // ends the pager too, should the run end before its window
	<-paged
	if err := <-errc; err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	if runErr != nil {
		return StatusPageResult{}, fmt.Errorf("%s: %w", arm, runErr)
	}
	if n := s.l.Accounted(); n < w.Messages {
		fmt.Fprintf(b.stderr, "%s capped after %v: %d of %s accounted for\n", label,
			time.Since(began).Round(time.Second), n, cli.Count(w.Messages, "message"))
	}
	cr := s.result(arm, time.Time{}, b.stderr)
	r := StatusPageResult{Run: arm, Every: every, Rate: cr.OthersRate, P99: cr.OthersP99, Violations: cr.Violations,
		Overlaps: cr.Overlaps, Duplicates: cr.Duplicates, Lost: cr.Lost, Finished: cr.Finished, Elapsed: cr.Elapsed}
	pg.sum(&r, w.Duration)
	return r, nil
}

// pager loads a page every so often, one load at a time (as a browser's
// tab refreshing itself: a load that outlasts the interval delays the
// next), and keeps the loads' figures.
type pager struct {
	every time.Duration

	mu      sync.Mutex
	took    []time.Duration // each successful load: request to the last byte of the body
	failed  int
	failure string // the first failure
	bytes   int    // the last page's size
}

// run loads url every p.every from now until end (or ctx's end): the
// first at once. It closes its connections before it returns.
func (p *pager) run(ctx context.Context, url string, end time.Time) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t := time.NewTicker(p.every)
	defer t.Stop()
	for time.Now().Before(end) {
		p.load(ctx, cl, url)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *pager) load(ctx context.Context, cl *http.Client, url string) {
	fail := func(err error) {
		if ctx.Err() != nil {
			return // the run ended mid-load: not the page's failure
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.failed++; p.failed == 1 {
			p.failure = err.Error()
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fail(err)
		return
	}
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	switch {
	case err != nil:
		fail(err)
	case resp.StatusCode != http.StatusOK:
		fail(fmt.Errorf("GET status: %s", resp.Status))
	default:
		p.mu.Lock()
		defer p.mu.Unlock()
		p.took, p.bytes = append(p.took, took), int(n)
	}
}

func (p *pager) loads() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.took)
}

// sum sets r's page figures: the loads, their mean and slowest, the last
// page's size, the failures, and the share of the sending's window spent
// loading (the loads' durations summed ÷ the window).
func (p *pager) sum(r *StatusPageResult, window time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total time.Duration
	for _, d := range p.took {
		total += d
		r.SlowestLoad = max(r.SlowestLoad, d)
	}
	r.Loads, r.Failed, r.FirstFailure, r.PageBytes = len(p.took), p.failed, p.failure, p.bytes
	if len(p.took) > 0 {
		r.MeanLoad = total / time.Duration(len(p.took))
	}
	r.Busy = float64(total) / float64(window)
}
