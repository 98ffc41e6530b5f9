package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lanesdev/lanes/lanestest"
)

// Paced is an open-mode workload for the lanes consumer alone: messages
// sent at Rate per second for Duration, over Sessions sessions on a topic of
// Partitions partitions, each handled in Work, failing transiently with
// probability Transient.
type Paced struct {
	Sessions, Partitions, Rate int
	Work, Duration             time.Duration
	Transient                  float64
	// Progress words the live line while the phase runs, and Done the
	// line once it ended (nil: the bench's own, which name the run and
	// the consumer); the demo says it in its own words.
	Progress func(handled int64, total int) string
	Done     func(Result) string
}

// RunPaced runs p on broker, on a fresh topic named prefix-…, and returns
// the lanes consumer's figures. At a rate well below its capacity the
// latency is the pipeline's own, not time spent waiting in a backlog (the
// demo's paced phase).
func RunPaced(ctx context.Context, broker *lanestest.Broker, p Paced, prefix string, stderr io.Writer) (Result, error) {
	w := workload{Mode: "open", Sessions: p.Sessions, Work: p.Work, Transient: p.Transient,
		RetryWait: 5 * time.Millisecond, Rate: p.Rate, Duration: p.Duration, Partitions: p.Partitions}
	if err := w.finish(); err != nil {
		return Result{}, err
	}
	b := &bench{cfg: benchConfig{consumers: []string{consLanes}, pool: 1, maxRun: 30 * time.Second},
		broker: broker, brokers: broker.Addrs(), prefix: prefix, stderr: stderr, progress: p.Progress, done: p.Done}
	rs, err := b.runWorkload(ctx, w, 0, 1, 0)
	if err != nil {
		return Result{}, fmt.Errorf("paced phase: %w", err)
	}
	return rs[0], nil
}
