package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lanesdev/lanes/lanestest"
)

// pacedPhase runs the demo's second phase: the lanes consumer on a fresh
// topic while messages are sent at a fixed rate well below its capacity
// (the open mode of lanes bench), so the latency is the pipeline's own and
// not time spent waiting in a backlog.
func pacedPhase(ctx context.Context, broker *lanestest.Broker, cfg demoConfig, topic string, stderr io.Writer) (result, error) {
	w := workload{Mode: "open", Sessions: cfg.sessions, Work: cfg.work, Transient: cfg.transient,
		RetryWait: 5 * time.Millisecond, Rate: cfg.pacedRate, Duration: cfg.paced, Partitions: cfg.partitions}
	if err := w.finish(); err != nil {
		return result{}, err
	}
	b := &bench{cfg: benchConfig{consumers: []string{consLanes}, pool: 1, maxRun: 30 * time.Second},
		broker: broker, brokers: broker.Addrs(), prefix: topic + "-paced", stderr: stderr}
	rs, err := b.runWorkload(ctx, w, 0, 1, 0)
	if err != nil {
		return result{}, fmt.Errorf("paced phase: %w", err)
	}
	return rs[0], nil
}
