package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// What the side-by-side modes (stuck, grow, control, transactions, status
// page) share: their topics, the paced sender, the simulated work, the
// wait for a ready consumer.

// waitReady waits until c reports ready (assigned, brokers answering).
func waitReady(ctx context.Context, c *consumer.Consumer, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.Health().Ready {
		if time.Now().After(deadline) {
			return fmt.Errorf("the consumer was not ready within %v: %s", limit, strings.Join(c.Health().Reasons, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C: // readiness has no signal of its own
		}
	}
	return nil
}

// sleepWork is a handler's simulated work.
func sleepWork(d time.Duration) {
	if d > 0 {
		time.Sleep(d) // the simulated work of the handler
	}
}

// sendPaced sends w's messages through p at w's rate from began, one per
// session of names in turn, each numbered in its session (recorded in l)
// and stamped with its send time: "session|seq|Unix ns". It returns once
// every message was acknowledged (flushSent).
func sendPaced(ctx context.Context, p *producer.Producer, l *lanestest.Ledger, names []string, w workload, began time.Time) error {
	seqs := make([]int, len(names))
	var failed atomic.Pointer[error]
	note := func(err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for i := 0; i < w.Messages; {
		due := min(w.Messages, int(time.Since(began).Seconds()*float64(w.Rate))+1)
		for ; i < due; i++ {
			k := i % len(names)
			v := fmt.Sprintf("%s|%d|%d", names[k], seqs[k], time.Now().UnixNano())
			l.SendAsync(ctx, p, names[k], seqs[k], []byte(v), note)
			seqs[k]++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return flushSent(ctx, p, &failed)
}

// sentTo is how many of w's messages sendPaced sends to the k-th of n
// sessions.
func sentTo(w workload, k, n int) int {
	c := w.Messages / n
	if k < w.Messages%n {
		c++
	}
	return c
}

// makeTopics creates a run's topics with partitions each.
func (b *bench) makeTopics(ctx context.Context, partitions int32, topics ...string) error {
	return cli.CreateTopics(ctx, b.broker, 30*time.Second, partitions, topics...)
}

// dropTopics deletes a run's topics, 30 s at most, whatever its outcome.
func (b *bench) dropTopics(topics ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = b.broker.DeleteTopics(ctx, topics...)
}

// flushSent waits, a minute at most, for what p still sends, and returns
// the first send that failed (failed), if any.
func flushSent(ctx context.Context, p *producer.Producer, failed *atomic.Pointer[error]) error {
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if e := failed.Load(); e != nil {
		return fmt.Errorf("send: %w", *e)
	}
	return nil
}
