package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runEnv is what a consumer under test gets: where to read and whom to
// report each record to. A runner returns once ctx ends and it stopped.
type runEnv struct {
	brokers []string
	opts    []kgo.Opt // TLS, SASL
	topic   string
	group   string
	pool    int
	t       *tally
}

type runner func(ctx context.Context, e runEnv) error

// Consumers a benchmark compares, in report order.
const (
	consLanes = "lanes"
	consRaw   = "raw-poll"
	consPart  = "per-partition"
	consPool  = "key-pool"
	consMin   = "minimal"
	consCeil  = "ceiling"
	// consNone is lanes on a topic of OrderNone (--unordered): not in
	// allConsumers, the suite's, for it keeps no order to check.
	consNone = "lanes-unordered"
)

var runners = map[string]runner{consLanes: runLanes, consRaw: runRaw, consPart: runPerPartition, consPool: runKeyPool,
	consMin: runMinimal, consCeil: runCeiling, consNone: runLanesUnordered}

// kgoRecord shortens the record type in the baselines.
type kgoRecord = kgo.Record

// runLanes is the lanes consumer with its defaults, retrying on the
// workload's schedule (no jitter, never dead-lettering).
func runLanes(ctx context.Context, e runEnv) error {
	return runLanesOrdered(ctx, e, consumer.OrderSession)
}

// runLanesUnordered is runLanes on a topic of OrderNone: every record its
// own lane, handled as soon as a handler is free.
func runLanesUnordered(ctx context.Context, e runEnv) error {
	return runLanesOrdered(ctx, e, consumer.OrderNone)
}

// runLanesOrdered is runLanes with its topic in order.
func runLanesOrdered(ctx context.Context, e runEnv, order consumer.Order) error {
	w := e.t.w
	wait := max(w.RetryWait, time.Millisecond)
	c, err := consumer.New(consumer.Config{Brokers: e.brokers, Group: e.group, Topics: []string{e.topic}, ClientOptions: e.opts,
		Order: map[string]consumer.Order{e.topic: order},
		Retry: consumer.RetryPolicy{Forever: true, InitialInterval: wait, Multiplier: retryMultiplier,
			MaxInterval: wait * retryMaxFactor, Jitter: -1}},
		consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			return e.t.handle(m.Record.Value, m.Attempt)
		}))
	if err != nil {
		return fmt.Errorf("lanes consumer: %w", err)
	}
	return c.Run(ctx)
}

func groupClient(e runEnv) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.brokers...), kgo.ConsumerGroup(e.group), kgo.ConsumeTopics(e.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100 * time.Millisecond)}, e.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", e.group, err)
	}
	return cl, nil
}

// runRaw polls with plain franz-go and handles each record in the poll
// loop: the limit for zero work, with no order beyond the partition's and
// no commits.
func runRaw(ctx context.Context, e runEnv) error {
	cl, err := groupClient(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 512)
		fs.EachRecord(func(r *kgo.Record) { e.t.handleRetrying(ctx, r.Value) })
	}
	return nil
}

// runPerPartition is the usual way to keep order without lanes: one
// goroutine per partition handling its records one at a time.
func runPerPartition(ctx context.Context, e runEnv) error {
	queues := map[int32]*queue{}
	return fanOut(ctx, e, func(r *kgo.Record, start func() *queue) *queue {
		q := queues[r.Partition]
		if q == nil {
			q = start()
			queues[r.Partition] = q
		}
		return q
	})
}

// runKeyPool is a fixed pool of workers, each record going to the worker
// its key hashes to (virtual partitions: the model of zkafka and of most
// hand-rolled pools). Order holds per key; a slow key holds up every other
// key of its worker.
func runKeyPool(ctx context.Context, e runEnv) error {
	var workers []*queue
	return fanOut(ctx, e, func(r *kgo.Record, start func() *queue) *queue {
		if workers == nil {
			workers = make([]*queue, e.pool)
			for i := range workers {
				workers[i] = start()
			}
		}
		return workers[hashring.Jump(hashring.Sum64Bytes(r.Key), e.pool)]
	})
}

// fanOut polls and hands every record to the queue route picks (route may
// start a worker for a new queue); each queue's worker handles its records
// one at a time. Queues are unbounded, the baselines' best case: a bounded
// queue that blocks the poll loop starves every other queue behind the
// full one, and pausing partitions is what lanes does for them.
func fanOut(ctx context.Context, e runEnv, route func(*kgo.Record, func() *queue) *queue) error {
	cl, err := groupClient(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func() *queue {
		q := &queue{wake: make(chan struct{}, 1)}
		wg.Go(func() { q.work(ctx, e.t) })
		return q
	}
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 512)
		fs.EachRecord(func(r *kgo.Record) { route(r, start).push(r) })
	}
	return nil
}

// queue is one baseline worker's unbounded queue of records.
type queue struct {
	mu   sync.Mutex
	recs []*kgo.Record
	wake chan struct{}
}

func (q *queue) push(r *kgo.Record) {
	q.mu.Lock()
	q.recs = append(q.recs, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// work handles the queue's records in order until ctx ends.
func (q *queue) work(ctx context.Context, t *tally) {
	var batch []*kgo.Record
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		q.mu.Lock()
		batch, q.recs = q.recs, batch[:0]
		q.mu.Unlock()
		for _, r := range batch {
			if ctx.Err() != nil {
				return
			}
			t.handleRetrying(ctx, r.Value)
		}
		clear(batch)
	}
}
