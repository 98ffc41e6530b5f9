package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// stuckSpec is --stuck PCT:DURATION: the share of sessions whose handler
// fails for the first DURATION of the run.
type stuckSpec struct {
	share float64
	dur   time.Duration
	text  string
}

func parseStuck(s string) (stuckSpec, error) {
	bad := fmt.Errorf("--stuck %q: want PCT:DURATION, such as 1%%:10s (a share of sessions in (0, 100]%%, failing for a positive duration)", s)
	pct, d, ok := strings.Cut(s, ":")
	v, err := strconv.ParseFloat(strings.TrimSuffix(pct, "%"), 64)
	if !ok || err != nil || v <= 0 || v > 100 {
		return stuckSpec{}, bad
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		return stuckSpec{}, bad
	}
	return stuckSpec{share: v / 100, dur: dur, text: s}, nil
}

// parseStuck sets c up for a --stuck run from the flags fs parsed: base
// holds the workload flags' values, work --work's.
func (c *benchConfig) parseStuck(spec string, fs *flag.FlagSet, base workload, work string) error {
	st, err := parseStuck(spec)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"mode", "skew", "messages", "transient", "retry-wait", "consumers", "pool", "plots", "docs"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --stuck (it sends --rate msg/s for --duration to lanes alone, round robin over --sessions)", name)
		}
	}
	if given["work"] {
		d, err := time.ParseDuration(strings.TrimSpace(work))
		if err != nil || d < 0 {
			return fmt.Errorf("--work %q: with --stuck, want one duration such as 1ms", work)
		}
		base.Work = d
	}
	w, err := stuckWorkload(base, func(name string) bool { return given[name] }, st)
	if err != nil {
		return err
	}
	c.stuck, c.workloads = &st, []workload{w}
	return nil
}

// stuckWorkload is the open workload a --stuck run sends: the sessions,
// rate and work given (defaults: 10,000 msg/s, 1 ms of work), for twice
// the stuck duration (at least 5 s) unless --duration says otherwise.
func stuckWorkload(base workload, given func(string) bool, spec stuckSpec) (workload, error) {
	w := base
	w.Mode = "open"
	if !given("rate") {
		w.Rate = 10_000
	}
	if !given("duration") {
		w.Duration = max(2*spec.dur, 5*time.Second)
	}
	if !given("work") {
		w.Work = time.Millisecond
	}
	if err := w.finish(); err != nil {
		return w, err
	}
	if w.Duration <= spec.dur {
		return w, fmt.Errorf("--duration %v: must be longer than the stuck duration %v, so that the other sessions are measured around it", w.Duration, spec.dur)
	}
	if n := stuckCount(w.Sessions, spec.share); n >= w.Sessions {
		all := map[bool]string{true: "the only session", false: fmt.Sprintf("every one of the %d sessions", w.Sessions)}[w.Sessions == 1]
		return w, fmt.Errorf("--stuck %s: %s would be stuck; no other session to measure", spec.text, all)
	}
	return w, nil
}

// stuckCount is how many of n sessions a share makes stuck: at least one.
func stuckCount(n int, share float64) int { return max(1, int(math.Round(float64(n)*share))) }

// stuckMode is one run of a --stuck comparison.
type stuckMode struct {
	name  string
	stuck bool // the stuck sessions fail
	park  bool // Config.Park on
}

var stuckModes = []stuckMode{{"no stuck", false, false}, {"in-lane retries", true, false}, {"park", true, true}}

// StuckResult is one run's figures for the sessions that were not stuck.
type StuckResult struct {
	Mode string `json:"mode"`
	// OthersRate is the other sessions' messages handled per second in the
	// stuck duration from the first send (while the stuck sessions fail);
	// Ratio is it ÷ the no-stuck run's.
	OthersRate float64       `json:"others_msgs_per_s"`
	Ratio      float64       `json:"ratio"`
	P99        time.Duration `json:"others_p99_ns"` // send to handled, other sessions
	P99Ratio   float64       `json:"p99_ratio"`     // ÷ the no-stuck run's p99
	// PeakLag is the largest commit lag of one partition seen (records
	// between its committed offset and its end); LongestStall the longest
	// time one partition's committed offset stayed put with records after it.
	PeakLag      int64         `json:"peak_commit_lag"`
	LongestStall time.Duration `json:"longest_commit_stall_ns"`
	Parked       int64         `json:"peak_parked_records"`
	Violations   int           `json:"order_violations"`
	Overlaps     int           `json:"overlapping_calls"`
	Lost         int           `json:"lost"`
	Finished     bool          `json:"finished"`
	Elapsed      time.Duration `json:"elapsed_ns"`
}

// runStuck runs the --stuck comparison (--rounds times, its runs
// interleaved) and prints it.
func (b *bench) runStuck(ctx context.Context, w workload, spec stuckSpec, stdout io.Writer) error {
	stuck := stuckCount(w.Sessions, spec.share)
	rounds := max(b.cfg.rounds, 1)
	fmt.Fprintf(b.stderr, "stuck: %s, %d of them failing for the first %v; %d msg/s for %v, work %v, %s, %s, %s\n",
		cli.Count(w.Sessions, "session"), stuck, spec.dur, w.Rate, w.Duration, w.Work, cli.Count(w.Partitions, "partition"), cli.Count(rounds, "round"), b.where)
	var all [][]StuckResult
	for round := range rounds {
		var rs []StuckResult
		for i, m := range stuckModes {
			r, err := b.stuckRun(ctx, w, spec, m, round*len(stuckModes)+i)
			if err != nil {
				return err
			}
			r.Ratio, r.P99Ratio = 1, 1
			if len(rs) > 0 {
				r.Ratio, r.P99Ratio = r.OthersRate/rs[0].OthersRate, ratio(r.P99, rs[0].P99)
			}
			fmt.Fprintf(b.stderr, "[%d/%d] %-16s others %8.0f msg/s (%.2f), p99 %v (%.2f×), peak commit lag %d\n",
				round*len(stuckModes)+i+1, rounds*len(stuckModes), m.name, r.OthersRate, r.Ratio,
				r.P99.Round(100*time.Microsecond), r.P99Ratio, r.PeakLag)
			rs = append(rs, r)
		}
		all = append(all, rs)
	}
	rep := stuckReport{Spec: spec.text, StuckFor: spec.dur, Sessions: w.Sessions, Stuck: stuck, Rate: w.Rate, Duration: w.Duration,
		Work: w.Work, Partitions: w.Partitions, Where: b.where, Rounds: rounds, Results: medianResults(all)}
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}

// stuckRun runs one mode: a fresh topic (and park and dead-letter topics),
// one lanes consumer, the workload sent at its rate while it consumes,
// then until every message is accounted for or the cap passes.
func (b *bench) stuckRun(ctx context.Context, w workload, spec stuckSpec, m stuckMode, i int) (StuckResult, error) {
	topic := fmt.Sprintf("%s-stuck-%d", b.prefix, i)
	topics := []string{topic, topic + consumer.DefaultParkTopicSuffix, topic + "-dlq"}
	if err := b.makeTopics(ctx, int32(w.Partitions), topics...); err != nil {
		return StuckResult{}, err
	}
	defer b.dropTopics(topics...)
	s := newStuckSide(w, spec, m)
	cfg := consumer.Config{Brokers: b.brokers, Group: topic + "-g", Topics: []string{topic}, DeadLetterTopic: topic + "-dlq",
		ClientOptions: b.broker.Opts(), CommitInterval: 100 * time.Millisecond,
		Retry: consumer.RetryPolicy{Forever: true, InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond}}
	if m.park {
		cfg.Park = consumer.ParkPolicy{Enabled: true, Delay: spec.dur / 4, MaxDelay: spec.dur / 2,
			MaxAttempts: 100, OnExhausted: consumer.ParkRelease}
	}
	c, err := consumer.New(cfg, s.l.Handler("bench", consumer.HandlerFunc(s.handle)))
	if err != nil {
		return StuckResult{}, fmt.Errorf("%s: %w", m.name, err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx) }()
	stopRun := func() error { stop(); return <-errc }
	if err := waitReady(ctx, c, time.Minute); err != nil {
		_ = stopRun()
		return StuckResult{}, fmt.Errorf("%s: %w", m.name, err)
	}
	p, err := producer.New(producer.Config{Brokers: b.brokers, Topic: topic, ClientOptions: b.broker.Opts()})
	if err != nil {
		_ = stopRun()
		return StuckResult{}, fmt.Errorf("%s: producer: %w", m.name, err)
	}
	defer p.Close()
	sent := make(chan error, 1)
	go func() { sent <- s.send(rctx, p) }()
	watch := newLagWatch()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	capAt := time.Now().Add(w.Duration + spec.dur + b.cfg.maxRun + 30*time.Second)
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
			watch.sample(now, c.Stats())
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				cli.ProgressLine(b.stderr, tty, fmt.Sprintf("  %-16s %d/%d accounted for", m.name, s.l.Accounted(), w.Messages))
			}
		}
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	if err := stopRun(); err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	if runErr != nil {
		return StuckResult{}, fmt.Errorf("%s: %w", m.name, runErr)
	}
	if n := s.l.Accounted(); n < w.Messages {
		fmt.Fprintf(b.stderr, "  %s: capped after %v: %d of %s accounted for\n", m.name,
			time.Since(time.Unix(0, s.began.Load())).Round(time.Second), n, cli.Count(w.Messages, "message"))
	}
	return s.result(m.name, watch, b.stderr), nil
}

// stuckSide is a run's handler and sender: which sessions are stuck, when
// the run began, and the other sessions' figures.
type stuckSide struct {
	w     workload
	spec  stuckSpec
	m     stuckMode
	l     *lanestest.Ledger
	names []string
	stuck map[string]bool
	began atomic.Int64 // the first send, Unix ns

	mu       sync.Mutex
	lat      []time.Duration // other sessions: send to handled
	inWindow int             // other sessions' messages handled in the stuck duration from the first send
}

func newStuckSide(w workload, spec stuckSpec, m stuckMode) *stuckSide {
	s := &stuckSide{w: w, spec: spec, m: m, l: lanestest.NewLedger(), stuck: map[string]bool{}}
	n := stuckCount(w.Sessions, spec.share)
	for i := range w.Sessions {
		name := fmt.Sprintf("s%05d", i)
		s.names = append(s.names, name)
		if i*n/w.Sessions != (i+1)*n/w.Sessions { // n sessions spread evenly
			s.stuck[name] = true
		}
	}
	return s
}

var errStuck = errors.New("bench: injected failure of a stuck session")

// handle fails a stuck session's messages for the stuck duration from the
// first send; it times the other sessions' messages.
func (s *stuckSide) handle(_ context.Context, m *consumer.Message) error {
	session, rest, _ := strings.Cut(string(m.Record.Value), "|")
	_, at, _ := strings.Cut(rest, "|")
	now := time.Now()
	if s.stuck[session] {
		if s.m.stuck && now.Sub(time.Unix(0, s.began.Load())) < s.spec.dur {
			return errStuck
		}
		sleepWork(s.w.Work)
		return nil
	}
	sleepWork(s.w.Work)
	sentAt, _ := strconv.ParseInt(at, 10, 64)
	done := time.Now()
	s.mu.Lock()
	s.lat = append(s.lat, done.Sub(time.Unix(0, sentAt)))

	if done.Sub(time.Unix(0, s.began.Load())) <= s.spec.dur {
		s.inWindow++
	}
	s.mu.Unlock()
	return nil
}

// send sends the workload at its rate from now (sendPaced).
func (s *stuckSide) send(ctx context.Context, p *producer.Producer) error {
	began := time.Now()
	s.began.Store(began.UnixNano())
	return sendPaced(ctx, p, s.l, s.names, s.w, began)
}

// result sums a run up for the other sessions.
func (s *stuckSide) result(mode string, watch *lagWatch, stderr io.Writer) StuckResult {
	rep := s.l.Report()
	for i, d := range rep.Details {
		if i == 10 {
			fmt.Fprintf(stderr, "  %s: … %d more\n", mode, len(rep.Details)-i)
			break
		}
		fmt.Fprintf(stderr, "  %s: %s\n", mode, d)
	}
	r := StuckResult{Mode: mode, PeakLag: watch.peak, LongestStall: watch.stall, Parked: watch.parked,
		Violations: rep.Violations, Overlaps: rep.Overlaps, Lost: rep.Lost, Finished: rep.Lost == 0,
		Elapsed: time.Since(time.Unix(0, s.began.Load()))}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.OthersRate = float64(s.inWindow) / s.spec.dur.Seconds()
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		r.P99 = lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	}
	return r
}
