package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txRun runs one arm: fresh input and output topics and group, one lanes
// consumer whose handler works each message and produces one output (a
// copy of the input, keyed by its session) to the output topic: through a
// plain producer client, waiting for its acknowledgement, with every 0;
// with Message.Output in the transactional mode at CommitInterval every
// otherwise. A read_committed reader of the output topic (txWatch) times
// each output's visibility while the workload is sent at its rate; the
// run ends when every message is handled and every output visible, or
// the cap passes. In the transactional arms lanestest.ReadOutputs then
// checks the output topic: every input's output once, in input order.
func (b *bench) txRun(ctx context.Context, w workload, every time.Duration, i int, label string) (TxResult, error) {
	arm := txArm(every)
	fail := func(err error) (TxResult, error) { return TxResult{}, fmt.Errorf("%s: %w", arm, err) }
	topic := fmt.Sprintf("%s-tx-%d", b.prefix, i)
	out := topic + "-out"
	topics := []string{topic, out, topic + "-dlq"}
	if err := b.makeTopics(ctx, int32(w.Partitions), topics...); err != nil {
		return TxResult{}, err
	}
	defer b.dropTopics(topics...)
	s := newTxSide(w, out)
	cfg := consumer.Config{Brokers: b.brokers, Group: topic + "-g", Topics: []string{topic},
		DeadLetterTopic: topic + "-dlq", ClientOptions: b.broker.Opts()}
	if every > 0 {
		cfg.CommitInterval = every
		cfg.Transactions = consumer.TransactionPolicy{Enabled: true, ID: topic + "-tx"}
	} else {
		// the same partitioner as the transactional outputs', acks from
		// all replicas as a transaction's; no linger: the handler waits
		pl, err := b.broker.Client(kgo.RecordPartitioner(hashring.Partitioner(hashring.SchemeKafka)), kgo.ProducerLinger(0))
		if err != nil {
			return fail(fmt.Errorf("output producer: %w", err))
		}
		defer pl.Close()
		s.plain = pl
	}
	watch, err := newTxWatch(b.broker, out, w)
	if err != nil {
		return fail(err)
	}
	defer watch.close()
	c, err := consumer.New(cfg, s.l.Handler("bench", consumer.HandlerFunc(s.handle)))
	if err != nil {
		return fail(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx) }()
	stopRun := func() error { stop(); return <-errc }
	if err := waitReady(ctx, c, time.Minute); err != nil {
		_ = stopRun()
		return fail(err)
	}
	p, err := producer.New(producer.Config{Brokers: b.brokers, Topic: topic, ClientOptions: b.broker.Opts()})
	if err != nil {
		_ = stopRun()
		return fail(fmt.Errorf("producer: %w", err))
	}
	defer p.Close()
	began := time.Now()
	s.began.Store(began.UnixNano())
	watch.began.Store(began.UnixNano())
	watched := make(chan struct{})
	go func() { defer close(watched); watch.run(rctx) }()
	sent := make(chan error, 1)
	go func() { sent <- sendPaced(rctx, p, s.l, s.names, w, began) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	capAt := time.Now().Add(w.Duration + b.cfg.maxRun + 30*time.Second)
	sending, tty := true, cli.IsTTY(b.stderr)
	lastPrint := time.Now()
	var runErr error
	for runErr == nil && (sending || s.l.Accounted() < w.Messages || watch.visible() < w.Messages) && time.Now().Before(capAt) {
		select {
		case err := <-sent:
			sending, runErr = false, err
		case err := <-errc:
			errc <- err
			runErr = fmt.Errorf("consumer stopped: %v", err)
		case <-ctx.Done():
			runErr = ctx.Err()
		case now := <-tick.C:
			if now.Sub(lastPrint) >= progressEvery(tty) {
				lastPrint = now
				cli.ProgressLine(b.stderr, tty, fmt.Sprintf("%s %d/%d handled, %d visible", label, s.l.Accounted(), w.Messages,
					watch.visible()))
			}
		}
	}
	if tty {
		fmt.Fprint(b.stderr, "\r\033[K")
	}
	if err := stopRun(); err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	<-watched
	if runErr != nil {
		return fail(runErr)
	}
	if n, v := s.l.Accounted(), watch.visible(); n < w.Messages || v < w.Messages {
		fmt.Fprintf(b.stderr, "%s capped after %v: %d of %s handled, %d visible\n", label,
			time.Since(began).Round(time.Second), n, cli.Count(w.Messages, "message"), v)
	}
	r := s.result(arm, every, watch, c.Stats().Transactions, b.stderr)
	if every > 0 {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		rep, err := lanestest.ReadOutputs(rctx, append([]kgo.Opt{kgo.SeedBrokers(b.brokers...)}, b.broker.Opts()...), out)
		if err != nil {
			return fail(err)
		}
		r.checkOutputs(rep, w.Messages)
	}
	return r, nil
}
