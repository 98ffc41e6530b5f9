package lanestest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// A user's integration test with both ends: an embedded broker, the lanes
// producer sending three sessions' conversations, a lanes consumer whose
// handler fails now and then (one message for good), and the ledger's
// verdict over every message.
func Example() {
	b, err := lanestest.NewBroker(4, "chat", "chat-dlq")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	l := lanestest.NewLedger()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "chat"})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	for seq := 0; seq < 5; seq++ {
		for _, session := range []string{"chat-1", "chat-2", "chat-3"} {
			if err := l.Send(ctx, p, session, seq, fmt.Appendf(nil, "%s says %d", session, seq)); err != nil {
				panic(err)
			}
		}
	}

	handler := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		switch {
		case m.SessionID == "chat-2" && string(m.Record.Value) == "chat-2 says 3":
			return consumer.Permanent(errors.New("cannot parse"))
		case m.Attempt == 1 && m.Record.Offset%3 == 0:
			return errors.New("downstream busy") // retried
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "chat-service", Topics: []string{"chat"},
		DeadLetterTopic: "chat-dlq", Retry: consumer.RetryPolicy{InitialInterval: time.Millisecond}},
		l.Handler("member-1", handler))
	if err != nil {
		panic(err)
	}
	if err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "chat-dlq"}); err != nil {
		panic(err)
	}
	r := l.Report()
	fmt.Println("messages", r.Messages, "dead-lettered", r.DeadLettered)
	fmt.Println("violations", r.Violations, "overlaps", r.Overlaps, "lost", r.Lost)
	fmt.Println(r.Err(false))
	// Output:
	// messages 15 dead-lettered 1
	// violations 0 overlaps 0 lost 0
	// <nil>
}

// chatService stands for a service that builds and hides its own consumer;
// its test reaches the consumer only through the middleware list it takes.
type chatService struct{ c *consumer.Consumer }

func newChatService(brokers []string, mw ...consumer.Middleware) (*chatService, error) {
	c, err := consumer.New(consumer.Config{Brokers: brokers, Group: "chat-service", Topics: []string{"chat"},
		DeadLetterTopic: "chat-dlq", Middleware: mw},
		consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }))
	return &chatService{c}, err
}

func (s *chatService) Run(ctx context.Context) error { return s.c.Run(ctx) }

// A service that hides its consumer is checked by adding the ledger's
// middleware (inside any dedup middleware) and running the service itself.
func ExampleLedger_Middleware() {
	b, err := lanestest.NewBroker(2, "chat", "chat-dlq")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := lanestest.NewLedger()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "chat"})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	for seq := range 3 {
		if err := l.Send(ctx, p, "chat-1", seq, []byte("hello")); err != nil {
			panic(err)
		}
	}
	svc, err := newChatService(b.Addrs(), l.Middleware("member-1"))
	if err != nil {
		panic(err)
	}
	if err := lanestest.Run(ctx, svc, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "chat-dlq"}); err != nil {
		panic(err)
	}
	fmt.Println(l.Report())
	// Output:
	// sessions 1, messages 3, calls 3: violations 0, overlaps 0, regressions 0, lost 0, duplicates 0 (redelivered 0, re-sent 0), DLQ 0
}
