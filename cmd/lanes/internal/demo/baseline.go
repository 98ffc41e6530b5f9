package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// baselineRate measures, on the demo's own topic, the usual way to keep
// order without lanes: one goroutine per partition, each handling its
// partition's records one at a time with the same handler work. It runs for
// at most d and returns records handled per second.
func baselineRate(ctx context.Context, broker *lanestest.Broker, topic string, work time.Duration, d time.Duration) (float64, error) {
	cl, err := broker.Client(kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		handled atomic.Int64
		wg      sync.WaitGroup
		queues  = map[int32]chan struct{}{}
	)
	worker := func(q <-chan struct{}) {
		defer wg.Done()
		for range q {
			select {
			case <-ctx.Done():
				return
			case <-time.After(work):
				handled.Add(1)
			}
		}
	}
	start := time.Now()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1000)
		fs.EachRecord(func(r *kgo.Record) {
			q := queues[r.Partition]
			if q == nil {
				q = make(chan struct{}, 1<<16)
				queues[r.Partition] = q
				wg.Add(1)
				go worker(q)
			}
			select {
			case q <- struct{}{}:
			default: // the sample is long enough already
			}
		})
	}
	elapsed := time.Since(start)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	return float64(handled.Load()) / elapsed.Seconds(), nil
}
