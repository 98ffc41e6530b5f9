package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/lanestest"
)

// bench is one lanes-lab bench invocation: its broker and settings.
type bench struct {
	cfg     benchConfig
	broker  *lanestest.Broker
	brokers []string
	where   string
	prefix  string // of every topic it creates
	stderr  io.Writer
	// progress and done, when set, word a run's live line and its last
	// line instead of the bench (RunPaced: the demo's paced phase).
	progress func(handled int64, total int) string
	done     func(Result) string
}

// runWorkload runs every consumer on one workload: in closed mode all read
// the same preloaded topic (each with a fresh group); in open mode each
// gets a fresh topic that is sent to while it consumes.
func (b *bench) runWorkload(ctx context.Context, w workload, wi, runs, done int) ([]Result, error) {
	p := w.plan()
	snd, err := newSender(b.broker, w, p)
	if err != nil {
		return nil, err
	}
	defer snd.close()
	var topics []string
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if len(topics) > 0 {
			_ = b.broker.DeleteTopics(dctx, topics...)
		}
	}()
	newTopic := func(suffix string) (string, error) {
		topic := fmt.Sprintf("%s-%d%s", b.prefix, wi, suffix)
		if err := cli.CreateTopics(ctx, b.broker, 30*time.Second, int32(w.Partitions), topic); err != nil {
			return "", err
		}
		topics = append(topics, topic)
		return topic, nil
	}
	var topic string
	if w.Mode == "closed" {
		if topic, err = newTopic(""); err != nil {
			return nil, err
		}
		if err := snd.preload(ctx, topic); err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, name := range b.cfg.consumersFor(w) {
		if w.Mode == "open" {
			if topic, err = newTopic("-" + name); err != nil {
				return out, err
			}
		}
		label := fmt.Sprintf("[%d/%d]", done+len(out)+1, runs)
		r, err := runOne(ctx, b, w, p, name, topic, snd, label)
		if err != nil {
			return out, err
		}
		if b.done != nil {
			fmt.Fprintln(b.stderr, b.done(r))
		} else {
			fmt.Fprintf(b.stderr, "%s  %-13s %9.0f msg/s steady, %9.0f wall, p99 %v%s\n", label, name, r.Steady, r.Wall,
				r.P99.Round(10*time.Microsecond), map[bool]string{true: "", false: " (capped: not finished)"}[r.Finished])
		}
		out = append(out, r)
	}
	return out, nil
}

// Result is one consumer's figures on one workload.
type Result struct {
	Workload string `json:"workload"`
	Consumer string `json:"consumer"`
	Messages int    `json:"messages"`
	Handled  int64  `json:"handled"`
	// Finished is false when the run hit its time cap first; its rates are
	// then measured over what it handled.
	Finished bool    `json:"finished"`
	Steady   float64 `json:"steady_msgs_per_s"` // between 10 % and 90 % of the messages handled
	Wall     float64 `json:"wall_msgs_per_s"`   // from the consumer's start to its last message
	// Active is from the first attempt's start to the last message: what the
	// bound is compared with (it holds from the busiest session's first
	// message on; the steady window leaves out a skewed run's tail).
	Active float64 `json:"active_msgs_per_s"`
	// Bound is what per-session order allows (messages ÷ the busiest
	// session's cost), 0 when the work is zero.
	Bound float64 `json:"bound_msgs_per_s,omitempty"`
	// Ratio is Steady ÷ Bound, or ÷ raw polling's steady rate when the
	// work is zero (RatioTo says which).
	Ratio   float64 `json:"ratio,omitempty"`
	RatioTo string  `json:"ratio_to,omitempty"`
	// OfCeiling is Steady ÷ the ceiling baseline's steady rate on the same
	// workload (0 when the ceiling did not run).
	OfCeiling      float64       `json:"of_ceiling,omitempty"`
	P50            time.Duration `json:"p50_ns"`
	P99            time.Duration `json:"p99_ns"`
	P999           time.Duration `json:"p999_ns"`
	Max            time.Duration `json:"max_ns"`
	Violations     int64         `json:"order_violations"`  // gaps, repeats, overtakings
	Overlaps       int64         `json:"overlapping_calls"` // two calls of one session at once
	AllocsPerMsg   float64       `json:"allocs_per_msg"`
	PeakHeap       uint64        `json:"peak_heap_bytes"`
	PeakGoroutines int           `json:"peak_goroutines"`
	Elapsed        time.Duration `json:"elapsed_ns"`
	cdf            []time.Duration
}

// runOne runs one consumer on one workload until every message was handled
// or maxRun passed, and measures it.
func runOne(ctx context.Context, b *bench, w workload, p plan, name, topic string, snd *sender, label string) (Result, error) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(samples)
	allocs0 := samples[0].Value.Uint64()

	t := newTally(w, p, time.Now()) // open mode: the base moves to the first paced send
	t.unordered = name == consNone
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	env := runEnv{brokers: b.brokers, opts: b.broker.Opts(), topic: topic, group: topic + "-" + name, pool: b.cfg.poolFor(w), t: t}
	go func() { errc <- runners[name](rctx, env) }()
	peakHeap, peakG := samples[1].Value.Uint64(), runtime.NumGoroutine()
	sendErr := make(chan error, 1)
	if w.Mode == "open" {
		pctx, cancel := context.WithTimeout(ctx, b.cfg.maxRun+30*time.Second)
		err := snd.prime(pctx, topic)
		if err == nil {
			err = t.waitPrimed(pctx, w.Partitions)
		}
		cancel()
		if err != nil {
			stop()
			<-errc
			return Result{}, fmt.Errorf("%s on %s: waiting for the consumer to start: %w", name, w.Name, err)
		}
		t.base.Store(time.Now().UnixNano())
	}
	cap := b.cfg.maxRun
	if w.Mode == "open" {
		cap += w.Duration
		go snd.paced(rctx, topic, time.Unix(0, t.base.Load()), func(err error) {
			select {
			case sendErr <- err:
			default:
			}
		})
	}
	deadline := time.NewTimer(cap)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastPrint, tty := time.Now(), cli.IsTTY(b.stderr)
	var end time.Time
	var err error
loop:
	for {
		select {
		case <-t.finished:
			end = time.Now()
			break loop
		case <-deadline.C:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case err = <-sendErr:
			err = fmt.Errorf("%s on %s: send: %w", name, w.Name, err)
			break loop
		case err = <-errc:
			err = fmt.Errorf("%s on %s: consumer stopped: %w", name, w.Name, err)
			errc <- nil
			break loop
		case now := <-tick.C:
			metrics.Read(samples)
			peakHeap, peakG = max(peakHeap, samples[1].Value.Uint64()), max(peakG, runtime.NumGoroutine())
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				line := fmt.Sprintf("%s  %-13s %s: %d/%d handled", label, name, w.Name, t.handled(), w.Messages)
				if b.progress != nil {
					line = b.progress(t.handled(), w.Messages)
				}
				cli.ProgressLine(b.stderr, tty, line)
			}
		}
	}
	if end.IsZero() {
		end = time.Now()
	}
	metrics.Read(samples)
	allocs := samples[0].Value.Uint64() - allocs0
	stop()
	if rerr := <-errc; rerr != nil && err == nil {
		err = fmt.Errorf("%s on %s: %w", name, w.Name, rerr)
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	r := t.result(name, end, allocs, peakHeap, peakG)
	r.Bound = finite(p.bound)
	return r, err
}

func finite(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	return x
}

// result measures a finished (or capped) run.
func (t *tally) result(name string, end time.Time, allocs, peakHeap uint64, peakG int) Result {
	n := t.handled()
	elapsed := end.Sub(time.Unix(0, t.base.Load()))
	r := Result{Workload: t.w.Name, Consumer: name, Messages: t.w.Messages, Handled: n, Finished: n >= t.total,
		Violations: t.violations.Load(), Overlaps: t.overlaps.Load(), PeakHeap: peakHeap, PeakGoroutines: peakG,
		Elapsed: elapsed}
	if n == 0 {
		return r
	}
	r.AllocsPerMsg = float64(allocs) / float64(n)
	r.Wall = float64(n) / elapsed.Seconds()
	if span := time.Duration(t.lastHandled() - t.first.Load()); span > 0 {
		r.Active = float64(n) / span.Seconds()
	}
	r.Steady = steadyRate(t.completions(), t.total, elapsed, r.Wall)
	lat := make([]time.Duration, 0, n)
	for _, l := range t.lat {
		if l != 0 {
			lat = append(lat, time.Duration(l))
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return r
	}
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	r.P50, r.P99, r.P999, r.Max = q(0.5), q(0.99), q(0.999), lat[len(lat)-1]
	const points = 400
	for i := range points {
		r.cdf = append(r.cdf, q(float64(i)/points))
	}
	r.cdf = append(r.cdf, r.Max)
	return r
}

// steadyRate is the rate between 10 % and 90 % of the messages handled (of
// total), from their completion times in order; for a run cut short, from
// 10 % to its end (elapsed); wall when it got no further.
func steadyRate(done []time.Duration, total int64, elapsed time.Duration, wall float64) float64 {
	q10, q90 := max(1, total/10), max(1, total*9/10)
	n := int64(len(done))
	switch {
	case n >= total && q90 > q10 && done[q90-1] > done[q10-1]:
		return float64(q90-q10) / (done[q90-1] - done[q10-1]).Seconds()
	case n > q10 && elapsed > done[q10-1]:
		return float64(n-q10) / (elapsed - done[q10-1]).Seconds()
	}
	return wall
}

func progressEvery(tty bool) time.Duration {
	if tty {
		return 250 * time.Millisecond
	}
	return time.Second
}
