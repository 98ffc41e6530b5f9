package dedup_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// panicValue is what the handlers of these tests panic with.
type panicValue struct{ attempt int }

// handle calls h and returns the value it panicked with, or its error.
func handle(ctx context.Context, h consumer.Handler, m *consumer.Message) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, h.Handle(ctx, m)
}

// TestPanicReleases: a handler that panics has its claim released on the
// way out, and the panic reaches the caller with its own value: the retry
// runs the handler at once instead of waiting for ClaimTTL.
func TestPanicReleases(t *testing.T) {
	d, _ := dedup.New(dedup.Config{Store: newMemory(t), Group: "g", ClaimTTL: time.Minute, WaitInterval: time.Millisecond})
	calls := 0
	h := d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		calls++
		if calls == 1 {
			panic(panicValue{calls})
		}
		return nil
	}))
	p, err := handle(context.Background(), h, message("e1"))
	if p != (panicValue{1}) || err != nil {
		t.Fatalf("first attempt: error %v, panic %v; want the handler's panic value", err, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if p, err := handle(ctx, h, message("e1")); err != nil || p != nil {
		t.Fatalf("retry after the panic: error %v, panic %v; want the handler run (its claim released)", err, p)
	}
	if calls != 2 {
		t.Fatalf("handler ran %d times, want 2", calls)
	}
	if _, err := handle(ctx, h, message("e1")); err != nil || calls != 2 {
		t.Fatalf("a redelivery after success: error %v, %d calls; want skipped", err, calls)
	}
	if st := d.Stats(); st.Ran != 2 || st.Skipped != 1 || st.Waited != 0 {
		t.Fatalf("stats %+v: want 2 ran, 1 skipped, none waited", st)
	}
}

// TestPanicRetriedByConsumer: through a consumer on an embedded broker, a
// handler that panics on its first attempt and succeeds on its second: the
// consumer counts the panic, the retry runs the handler (it does not wait
// for the panicked attempt's claim, which would outlive HandlerTimeout and
// dead-letter the event as a timeout), and the effect is applied once.
func TestPanicRetriedByConsumer(t *testing.T) {
	const topic, dlq = "panics", "panics-dlq"
	b, err := lanestest.NewBroker(1, topic, dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	l := lanestest.NewLedger()
	err = l.Send(ctx, p, "order-1", 0, []byte("charge"))
	p.Close()
	if err != nil {
		t.Fatal(err)
	}

	d, _ := dedup.New(dedup.Config{Store: newMemory(t), Group: "g", ClaimTTL: time.Minute, WaitInterval: 10 * time.Millisecond})
	var calls, effects atomic.Int32
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		if n := calls.Add(1); n == 1 {
			panic(panicValue{int(n)})
		}
		effects.Add(1)
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "g", Topics: []string{topic}, DeadLetterTopic: dlq,
		HandlerTimeout: 500 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
		Retry: consumer.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxAttempts: 3},
		Middleware: []consumer.Middleware{
			func(h consumer.Handler) consumer.Handler { return l.Handler("m1", h) },
			d.Middleware,
		},
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Want: 1, Broker: b, DeadLetterTopic: dlq}); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	rep := l.Report()
	if rep.DeadLettered != 0 || rep.Lost != 0 {
		t.Fatalf("%v: %v; want the event handled by its retry", rep, rep.Details)
	}
	if calls.Load() != 2 || effects.Load() != 1 {
		t.Fatalf("handler called %d times, effect applied %d times; want 2 calls, 1 effect", calls.Load(), effects.Load())
	}
	if n := c.Stats().Panics; n != 1 {
		t.Fatalf("consumer counted %d panics, want 1", n)
	}
	if st := d.Stats(); st.Ran != 2 || st.Waited != 0 {
		t.Fatalf("dedup stats %+v: want 2 ran, none waited for a claim", st)
	}
}
