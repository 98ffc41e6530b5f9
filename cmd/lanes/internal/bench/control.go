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
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
)

// controlSpec is --control PCT: the share of sessions an operator
// controls in the second run of each round, half of them paused for the
// whole run, half limited to controlRate; with park (--park), parking on
// in both runs.
type controlSpec struct {
	share    float64
	text     string
	park     bool
	buffered int // --max-buffered: both runs' MaxBufferedRecords; 0: controlBuffered
}

// The limit --control sets on its limited sessions: controlRate records
// a second, in bursts of controlBurst (below the rate each session is
// sent at, --rate ÷ --sessions, in the default run: 5 a second).
const (
	controlRate  = 2
	controlBurst = 1
)

func parseControlSpec(s string) (controlSpec, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v <= 0 || v > 100 || math.IsNaN(v) {
		return controlSpec{}, fmt.Errorf("--control %q: want a share of the sessions in (0, 100]%%, such as 1%%", s)
	}
	return controlSpec{share: v / 100, text: s}, nil
}

// parseControl sets c up for a --control run from the flags fs parsed:
// base holds the workload flags' values, work --work's.
func (c *benchConfig) parseControl(spec string, park bool, buffered int, fs *flag.FlagSet, base workload, work string) error {
	cs, err := parseControlSpec(spec)
	if err != nil {
		return err
	}
	if buffered < 0 {
		return fmt.Errorf("--max-buffered %d: must not be negative (0: a partition's whole share of the run)", buffered)
	}
	cs.park, cs.buffered = park, buffered
	given := visited(fs)
	for _, name := range []string{"mode", "skew", "messages", "transient", "retry-wait", "consumers", "pool", "plots", "docs", "stuck", "grow", "scale"} {
		if given[name] {
			return fmt.Errorf("--%s: not used with --control (it sends --rate msg/s for --duration to lanes alone, round robin over --sessions)", name)
		}
	}
	w, err := openWorkload(base, given, work, "control", c.partitions)
	if err != nil {
		return err
	}
	if n := controlCount(w.Sessions, cs.share); n >= w.Sessions {
		return fmt.Errorf("--control %s: %s of %s would be controlled (at least 2: one paused, one limited); no other session to measure: raise --sessions",
			spec, cli.Count(n, "session"), cli.Count(w.Sessions, "session"))
	}
	c.control, c.workloads = &cs, []workload{w}
	return nil
}

// controlCount is how many of n sessions a share controls: at least two,
// one paused and one limited.
func controlCount(n int, share float64) int { return max(2, int(math.Round(float64(n)*share))) }

// controlArms are the two runs of a round: no session controlled, and
// the share given.
var controlArms = []string{"none controlled", "controlled"}

// controlBuffered is the MaxBufferedRecords of both runs: --max-buffered,
// or by default a partition's whole share of the run, twice over
// (partitions are uneven), at least the consumer's default. A paused or
// limited session holds its partition's watermark, so every record
// fetched after its first waiting one stays counted; at the default bound
// a partition of a paused session would stop handing records to lanes
// partway through a long run (its other sessions then wait too, as Health
// says): the buffer's limit, not what the run measures by default.
func controlBuffered(w workload, spec controlSpec) int {
	if spec.buffered > 0 {
		return spec.buffered
	}
	return max(consumer.DefaultMaxBufferedRecords, 2*w.Messages/w.Partitions)
}

// runControl runs the --control comparison (--rounds times, the two arms
// of a round one after the other) and prints it.
func (b *bench) runControl(ctx context.Context, w workload, spec controlSpec, stdout io.Writer) error {
	rounds := max(b.cfg.rounds, 1)
	roles := assignRoles(sessionNames(w.Sessions), spec.share)
	paused, limited := roles.count(rolePaused), roles.count(roleLimited)
	parking := map[bool]string{true: "parking on", false: "parking off"}[spec.park]
	fmt.Fprintf(b.stderr, "control: %s, %d paused and %d limited to %d/s (burst %d); %d msg/s for %v, work %v, %s, %s, MaxBufferedRecords %d, %s, %s\n",
		cli.Count(w.Sessions, "session"), paused, limited, controlRate, controlBurst, w.Rate, w.Duration, w.Work,
		cli.Count(w.Partitions, "partition"), parking, controlBuffered(w, spec), cli.Count(rounds, "round"), b.where)
	var all [][]ControlResult
	for round := range rounds {
		var rs []ControlResult
		for i, arm := range controlArms {
			n := round*len(controlArms) + i
			label := fmt.Sprintf("[%d/%d] %-15s", n+1, rounds*len(controlArms), arm)
			r, err := b.controlRun(ctx, w, spec, roles, i == 1, n, label)
			if err != nil {
				return err
			}
			if len(rs) > 0 {
				r.within(rs[0])
			} else {
				r.OthersRatio, r.OthersP99Ratio = 1, 1
			}
			fmt.Fprintf(b.stderr, "%s others %6.0f msg/s (%.2f), p99 %s (%.2f×); paused sessions %d of %d handled; limited at most %.2f/s; lanes asleep %d paused, %d throttled; the rest handled %s after the controls were lifted\n",
				label, r.OthersRate, r.OthersRatio, FormatDuration(r.OthersP99), r.OthersP99Ratio, r.PausedHandled, r.PausedSent,
				r.LimitedRate, r.LanesPaused, r.LanesThrottled, FormatDuration(r.Drain))
			rs = append(rs, r)
		}
		all = append(all, rs)
	}
	rep := controlReport{Control: spec.text, Sessions: w.Sessions, Paused: paused, Limited: limited,
		Limit: controlRate, Burst: controlBurst, Park: spec.park, Buffered: controlBuffered(w, spec),
		Rate: w.Rate, Duration: w.Duration, Work: w.Work, Partitions: w.Partitions, Where: b.where, Rounds: rounds,
		Results: medianControl(all)}
	if b.cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
	}
	return rep.verdict()
}

// controlRun runs one arm: a fresh topic, control topic and group (and
// park topic with --park), the sessions of roles paused and limited
// before the consumer starts when controls, one lanes consumer with
// per-session control on, the workload sent at its rate while it
// consumes, then until every other session's message was handled or the
// cap passes (the paused ones never are, the limited ones at their
// rate): the measured run. Then the controls are lifted (the paused
// sessions resumed, the limits removed) and it runs until every message
// was handled, for the ledger to check them all.
func (b *bench) controlRun(ctx context.Context, w workload, spec controlSpec, roles controlRoles, controls bool, i int, label string) (ControlResult, error) {
	arm := controlArms[map[bool]int{false: 0, true: 1}[controls]]
	topic := fmt.Sprintf("%s-control-%d", b.prefix, i)
	ctlTopic, group := topic+".control", topic+"-g"
	topics := []string{topic, topic + "-dlq"}
	if spec.park {
		topics = append(topics, topic+consumer.DefaultParkTopicSuffix)
	}
	defer b.dropTopics(append(topics, ctlTopic)...)
	if err := b.makeTopics(ctx, int32(w.Partitions), topics...); err != nil {
		return ControlResult{}, err
	}
	if err := b.makeTopics(ctx, 1, ctlTopic); err != nil { // in both arms: the member reads it alike
		return ControlResult{}, err
	}
	if controls {
		if err := b.applyControls(ctx, consumer.ControlTarget{Brokers: b.brokers, Group: group, Topic: ctlTopic,
			By: "lanes-lab bench", ClientOptions: b.broker.Opts()}, topic, roles); err != nil {
			return ControlResult{}, fmt.Errorf("%s: %w", arm, err)
		}
	}
	s := newControlSide(w, roles)
	cfg := consumer.Config{Brokers: b.brokers, Group: group, Topics: []string{topic}, DeadLetterTopic: topic + "-dlq",
		ClientOptions: b.broker.Opts(), MaxBufferedRecords: controlBuffered(w, spec),
		Control: consumer.ControlPolicy{Enabled: true, Topic: ctlTopic, Interval: 100 * time.Millisecond}}
	if spec.park {
		cfg.Park = consumer.ParkPolicy{Enabled: true}
	}
	c, err := consumer.New(cfg, s.l.Handler("bench", consumer.HandlerFunc(s.handle)))
	if err != nil {
		return ControlResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx) }()
	stopRun := func() error { stop(); return <-errc }
	if err := waitReady(ctx, c, time.Minute); err != nil {
		_ = stopRun()
		return ControlResult{}, fmt.Errorf("%s: %w", arm, err)
	}
	p, err := producer.New(producer.Config{Brokers: b.brokers, Topic: topic, ClientOptions: b.broker.Opts()})
	if err != nil {
		_ = stopRun()
		return ControlResult{}, fmt.Errorf("%s: producer: %w", arm, err)
	}
	defer p.Close()
	began := time.Now()
	s.began.Store(began.UnixNano())
	sent := make(chan error, 1)
	go func() { sent <- sendPaced(rctx, p, s.l, s.names, w, began) }()
	lags, asleep := newLagWatch(), &asleepWatch{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	capAt := time.Now().Add(w.Duration + b.cfg.maxRun + 30*time.Second)
	sending, tty := true, cli.IsTTY(b.stderr)
	lastPrint := time.Now()
	var runErr error
	for runErr == nil && (sending || s.othersDone.Load() < int64(s.othersSent)) && time.Now().Before(capAt) {
		select {
		case err := <-sent:
			sending, runErr = false, err
		case err := <-errc:
			errc <- err
			runErr = fmt.Errorf("consumer stopped: %v", err)
		case <-ctx.Done():
			runErr = ctx.Err()
		case now := <-tick.C:
			st := c.Stats()
			lags.sample(now, st)
			asleep.sample(st.Control)
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				cli.ProgressLine(b.stderr, tty, fmt.Sprintf("%s others %d/%d handled", label, s.othersDone.Load(), s.othersSent))
			}
		}
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	st := c.Stats()
	lags.sample(time.Now(), st)
	asleep.sample(st.Control)
	if n := s.othersDone.Load(); runErr == nil && n < int64(s.othersSent) {
		fmt.Fprintf(b.stderr, "%s capped after %v: %d of the other sessions' %s handled\n", label,
			time.Since(began).Round(time.Second), n, cli.Count(s.othersSent, "message"))
	}
	var lifted time.Time
	var drain time.Duration
	if runErr == nil {
		lifted = time.Now()
		if controls {
			runErr = liftControls(rctx, c, topic, roles)
		}
		if runErr == nil {
			wctx, cancel := context.WithTimeout(rctx, b.cfg.maxRun+30*time.Second)
			runErr = s.l.WaitAccounted(wctx, w.Messages)
			cancel()
			drain = time.Since(lifted)
		}
		if runErr != nil && ctx.Err() == nil {
			fmt.Fprintf(b.stderr, "%s the controls lifted, %d of %s handled after %v: %v\n", label, s.l.Accounted(),
				cli.Count(w.Messages, "message"), time.Since(lifted).Round(time.Second), runErr)
			runErr = nil // the ledger reports what is missing
		}
	}
	if err := stopRun(); err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	if runErr != nil {
		return ControlResult{}, fmt.Errorf("%s: %w", arm, runErr)
	}
	r := s.result(arm, lifted, b.stderr)
	r.PeakLag, r.LongestStall, r.Parked, r.PausedParked = lags.peak, lags.stall, lags.parked, st.Control.PausedParked
	r.LanesPaused, r.LanesThrottled, r.Drain = asleep.paused, asleep.throttled, drain
	return r, nil
}

// liftControls resumes the paused sessions of roles and removes the
// limited ones' limit, through c (which reads the change at once).
func liftControls(ctx context.Context, c *consumer.Consumer, topic string, roles controlRoles) error {
	for _, name := range sessionNames(len(roles)) {
		var err error
		switch roles[name] {
		case rolePaused:
			_, err = c.ResumeSession(ctx, topic, name)
		case roleLimited:
			_, err = c.LimitSession(ctx, topic, name, consumer.Limit{}, "lanes-lab bench --control: the run is over")
		}
		if err != nil {
			return fmt.Errorf("lift the control of session %s: %w", name, err)
		}
	}
	return nil
}

// applyControls pauses and limits the sessions of roles on topic, as an
// operator would (lanes session pause, lanes session limit).
func (b *bench) applyControls(ctx context.Context, ct consumer.ControlTarget, topic string, roles controlRoles) error {
	for _, name := range sessionNames(len(roles)) {
		var err error
		switch roles[name] {
		case rolePaused:
			_, err = consumer.PauseSession(ctx, ct, topic, name, "lanes-lab bench --control: paused for the whole run")
		case roleLimited:
			_, err = consumer.LimitSession(ctx, ct, topic, name, consumer.Limit{Rate: controlRate, Burst: controlBurst},
				"lanes-lab bench --control: limited for the whole run")
		}
		if err != nil {
			return fmt.Errorf("control session %s: %w", name, err)
		}
	}
	return nil
}

// asleepWatch keeps the most lanes seen asleep at once (Stats.Control,
// sampled every 100 ms), paused and held by a rate.
type asleepWatch struct{ paused, throttled int }

func (a *asleepWatch) sample(st consumer.ControlStats) {
	a.paused, a.throttled = max(a.paused, st.LanesPaused), max(a.throttled, st.LanesThrottled)
}
