package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer"
)

// A chat service: two messages of one session, handled in order on an
// embedded broker.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chat", "chat-dlq"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	producer.ProduceSync(ctx,
		&kgo.Record{Topic: "chat", Key: []byte("chat-42"), Value: []byte("book a flight to London")},
		&kgo.Record{Topic: "chat", Key: []byte("chat-42"), Value: []byte("make it Paris")},
	)

	runCtx, stop := context.WithCancel(ctx)
	seen := 0
	c, err := consumer.New(consumer.Config{
		Brokers:         cluster.ListenAddrs(),
		Group:           "chat-service",
		Topics:          []string{"chat"},
		DeadLetterTopic: "chat-dlq",
	}, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		fmt.Printf("%s: %s\n", m.SessionID, m.Record.Value)
		if seen++; seen == 2 {
			stop()
		}
		return nil
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Run(runCtx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// chat-42: book a flight to London
	// chat-42: make it Paris
}

// Ping at start: tell the operator at once when the brokers cannot be
// reached or a topic is missing, instead of waiting to be assigned.
func ExampleConsumer_Ping() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	c, err := consumer.New(consumer.Config{
		Brokers:         cluster.ListenAddrs(),
		Group:           "payments",
		Topics:          []string{"orders"},
		DeadLetterTopic: "orders-dlq", // not created
	}, consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch err := c.Ping(ctx); {
	case errors.Is(err, consumer.ErrUnreachable):
		fmt.Println("no broker answers: check Brokers and the network")
	case errors.Is(err, consumer.ErrTopicMissing):
		fmt.Println("a topic is missing: create it before starting")
	case err != nil:
		fmt.Println("cannot check the cluster:", err)
	default:
		fmt.Println("ready to run")
	}
	// Output: a topic is missing: create it before starting
}

// Errors decide what happens next: nil is done, an error is retried with
// backoff, Permanent goes straight to the dead-letter topic.
func ExamplePermanent() {
	handle := func(ctx context.Context, m *consumer.Message) error {
		if len(m.Record.Value) == 0 {
			return consumer.Permanent(errors.New("empty request"))
		}
		return nil
	}
	err := handle(context.Background(), &consumer.Message{Record: &kgo.Record{}})
	fmt.Println(consumer.IsPermanent(err))
	// Output: true
}

// Retries: a bounded budget by attempts and time, or Forever.
func ExampleRetryPolicy() {
	p := consumer.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaxAttempts: 5}
	fmt.Println(p.MaxAttempts)
	// Output: 5
}

// Middleware wraps every handler attempt, the first entry outermost: here
// a metrics counter around a tighter timeout around the handler.
func ExampleMiddleware() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders-dlq"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order-7"), Value: []byte("pay")})

	var attempts, failures atomic.Int64
	metrics := func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			attempts.Add(1)
			err := next.Handle(ctx, m)
			if err != nil {
				failures.Add(1)
			}
			return err
		})
	}
	timeout := func(d time.Duration) consumer.Middleware {
		return func(next consumer.Handler) consumer.Handler {
			return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				ctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				return next.Handle(ctx, m)
			})
		}
	}
	c, err := consumer.New(consumer.Config{
		Brokers: cluster.ListenAddrs(), Group: "payments", Topics: []string{"orders"}, DeadLetterTopic: "orders-dlq",
		Retry:      consumer.RetryPolicy{InitialInterval: time.Millisecond},
		Middleware: []consumer.Middleware{metrics, timeout(5 * time.Second)},
	}, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if m.Attempt == 1 {
			return errors.New("payment service busy") // retried
		}
		_, hasDeadline := ctx.Deadline()
		fmt.Printf("%s: %s (attempt %d, deadline %v)\n", m.SessionID, m.Record.Value, m.Attempt, hasDeadline)
		stop()
		return nil
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Run(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("attempts %d, failures %d\n", attempts.Load(), failures.Load())
	// Output:
	// order-7: pay (attempt 2, deadline true)
	// attempts 2, failures 1
}

// A batch handler: one call gets the session's messages already waiting
// (one or both here), and stores them with one round trip. BatchError reports a
// partial success; the retry resumes at the first message not done.
func ExampleNewBatch() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders-dlq"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	producer.ProduceSync(ctx,
		&kgo.Record{Topic: "orders", Key: []byte("cart-7"), Value: []byte("add apples")},
		&kgo.Record{Topic: "orders", Key: []byte("cart-7"), Value: []byte("add pears")},
	)

	runCtx, stop := context.WithCancel(ctx)
	stored := 0
	c, err := consumer.NewBatch(consumer.Config{
		Brokers:         cluster.ListenAddrs(),
		Group:           "order-store",
		Topics:          []string{"orders"},
		DeadLetterTopic: "orders-dlq",
		MaxBatch:        100,
	}, consumer.BatchHandlerFunc(func(ctx context.Context, ms []*consumer.Message) error {
		// One INSERT of every row; if only the first n were written, return
		// &consumer.BatchError{Done: n, Err: err}.
		for _, m := range ms {
			fmt.Printf("%s: %s\n", m.SessionID, m.Record.Value)
		}
		if stored += len(ms); stored == 2 {
			stop()
		}
		return nil
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Run(runCtx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// cart-7: add apples
	// cart-7: add pears
}
