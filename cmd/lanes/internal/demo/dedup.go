package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/dedup/pgdedup"
	"github.com/lanesdev/lanes/dedup/redisdedup"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
)

// openStore returns the dedup store --dedup names, and a function that
// closes it.
func openStore(ctx context.Context, cfg demoConfig) (dedup.Store, func(), error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch cfg.dedup {
	case "memory":
		s, err := dedup.NewMemory(dedup.MemoryConfig{MaxEntries: 2 * cfg.messages})
		return s, func() {}, err
	case "redis":
		s, err := redisdedup.Connect(cctx, cfg.redisAddr, redisdedup.Config{Prefix: "lanes-demo:"})
		if err != nil {
			return nil, nil, fmt.Errorf("--dedup redis (--redis-addr %s): %w", cfg.redisAddr, err)
		}
		return s, func() { _ = s.Close() }, nil
	case "postgres":
		s, err := pgdedup.Connect(cctx, cfg.postgresDSN, pgdedup.Config{Table: "lanes_demo_dedup"})
		if err != nil {
			return nil, nil, fmt.Errorf("--dedup postgres (--postgres-dsn): %w", err)
		}
		return s, s.Close, nil
	}
	return nil, nil, fmt.Errorf("--dedup %q: want memory, redis or postgres", cfg.dedup)
}

// crashRun is the consumer side of the demo with --dedup: a first consumer
// runs until half of the messages are done and is stopped; the group's
// offsets go back to what it had committed when a quarter was done (a
// crash loses every commit after its last one; partitions with no commit
// then go back to their start); a second consumer takes over, gets
// everything handled since delivered again, and must apply none of it
// twice.
type crashRun struct {
	broker *lanestest.Broker
	cfg    consumer.Config
	chk    *checker
	store  dedup.Store
	total  int
	serve  func(*consumer.Consumer) // the health endpoint follows the consumer running

	dedups    []*dedup.Dedup
	rewoundTo int // messages done when the offsets it rewound to were current
	crashedAt int // messages done when the first consumer stopped
}

// consumer returns a consumer whose calls go through the ledger (every
// delivery), then the dedup middleware, then the demo's handler.
func (r *crashRun) consumer(member string) (*consumer.Consumer, error) {
	d, err := dedup.New(dedup.Config{Store: r.store, Group: r.cfg.Group})
	if err != nil {
		return nil, err
	}
	r.dedups = append(r.dedups, d)
	cfg := r.cfg
	cfg.Middleware = []consumer.Middleware{
		func(h consumer.Handler) consumer.Handler { return r.chk.ledger.Handler(member, h) },
		d.Middleware,
	}
	c, err := consumer.New(cfg, consumer.HandlerFunc(r.chk.handle))
	if err == nil {
		r.serve(c)
	}
	return c, err
}

func (r *crashRun) run(ctx context.Context, stderr io.Writer) error {
	first, err := r.consumer("before-crash")
	if err != nil {
		return err
	}
	ctx1, stop1 := context.WithCancel(ctx)
	defer stop1()
	done1 := make(chan error, 1)
	go func() { done1 <- first.Run(ctx1) }()
	var snap kadm.OffsetResponses
	adm, closeAdm, err := r.admin()
	if err != nil {
		stop1()
		return errors.Join(err, <-done1)
	}
	defer closeAdm()
	if err = r.chk.ledger.WaitAccounted(ctx, r.total/4); err == nil {
		r.rewoundTo = r.chk.ledger.Accounted()
		snap, err = adm.FetchOffsets(ctx, r.cfg.Group)
	}
	if err == nil {
		err = r.chk.ledger.WaitAccounted(ctx, r.total/2)
	}
	r.crashedAt = r.chk.ledger.Accounted()
	stop1()
	if err1 := <-done1; err1 != nil {
		fmt.Fprintln(stderr, "consumer before the crash:", err1)
	}
	if err != nil {
		return err
	}
	if err := r.rewind(ctx, adm, snap); err != nil {
		return err
	}
	second, err := r.consumer("after-crash")
	if err != nil {
		return err
	}
	return second.Run(ctx)
}

func (r *crashRun) admin() (*kadm.Client, func(), error) {
	cl, err := r.broker.Client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// rewind commits snap's offsets back (without lanes' completed-offsets
// metadata), and the start of every partition snap has no commit for.
func (r *crashRun) rewind(ctx context.Context, adm *kadm.Client, snap kadm.OffsetResponses) error {
	topic := r.cfg.Topics[0]
	parts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = parts.Error()
	}
	if err != nil {
		return fmt.Errorf("crash: list partitions: %w", err)
	}
	var to kadm.Offsets
	parts.Each(func(o kadm.ListedOffset) {
		at := o.Offset
		if c, ok := snap.Lookup(topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			at = c.At
		}
		to.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
	})
	resp, err := adm.CommitOffsets(ctx, r.cfg.Group, to)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("crash: rewind the group's offsets: %w", err)
	}
	return nil
}

// skipped sums what the dedup middleware of both consumers skipped.
func (r *crashRun) skipped() int64 {
	var n int64
	for _, d := range r.dedups {
		n += d.Stats().Skipped
	}
	return n
}
