package demo

import (
	"context"
	"fmt"
	"io"

	"github.com/lanesdev/lanes/cmd/lanes/internal/bench"
	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/lanestest"
)

// pacedPhase runs the demo's second phase: the lanes consumer on a fresh
// topic while messages are sent at a fixed rate well below its capacity
// (the open mode of lanes-lab bench), so the latency is the pipeline's own and
// not time spent waiting in a backlog.
func pacedPhase(ctx context.Context, broker *lanestest.Broker, cfg demoConfig, topic string, stderr io.Writer) (bench.Result, error) {
	return bench.RunPaced(ctx, broker, bench.Paced{Sessions: cfg.sessions, Partitions: cfg.partitions, Rate: cfg.pacedRate,
		Work: cfg.work, Duration: cfg.paced, Transient: cfg.transient,
		Progress: pacedProgress, Done: pacedDone}, topic+"-paced", stderr)
}

// pacedProgress is the paced phase's live line, in the words of the
// demo's own ("processed").
func pacedProgress(processed int64, total int) string {
	return fmt.Sprintf("paced phase: processed %d of %s", processed, cli.Count(total, "message"))
}

// pacedDone is its last line; the report gives its latencies.
func pacedDone(r bench.Result) string {
	if !r.Finished {
		return fmt.Sprintf("paced phase: stopped at its time limit, %d of %s processed", r.Handled, cli.Count(r.Messages, "message"))
	}
	return fmt.Sprintf("paced phase: %s processed", cli.Count(r.Handled, "message"))
}
