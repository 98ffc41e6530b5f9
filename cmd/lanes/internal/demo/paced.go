package demo

import (
	"context"
	"io"

	"github.com/lanesdev/lanes/cmd/lanes/internal/bench"
	"github.com/lanesdev/lanes/lanestest"
)

// pacedPhase runs the demo's second phase: the lanes consumer on a fresh
// topic while messages are sent at a fixed rate well below its capacity
// (the open mode of lanes bench), so the latency is the pipeline's own and
// not time spent waiting in a backlog.
func pacedPhase(ctx context.Context, broker *lanestest.Broker, cfg demoConfig, topic string, stderr io.Writer) (bench.Result, error) {
	return bench.RunPaced(ctx, broker, bench.Paced{Sessions: cfg.sessions, Partitions: cfg.partitions, Rate: cfg.pacedRate,
		Work: cfg.work, Duration: cfg.paced, Transient: cfg.transient}, topic+"-paced", stderr)
}
