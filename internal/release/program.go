package main

// program is the new user's program the release check builds: the lanes
// producer sends a message on an embedded broker and a lanes consumer
// handles it.
const program = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kfake"
)

// kit, when set (kit.go), runs the same round trip through lanestest.
var kit func(ctx context.Context) error

// typed, when set (typed.go), decodes payloads through the codec module.
var typed func(ctx context.Context) error

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := roundTrip(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
	fmt.Println("releasecheck: a message sent with producer and handled by consumer on the embedded broker")
	if kit != nil {
		if err := kit(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "releasecheck: lanestest:", err)
			os.Exit(1)
		}
		fmt.Println("releasecheck: lanestest accounted for a message sent and handled")
	}
	if typed != nil {
		if err := typed(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "releasecheck: codec:", err)
			os.Exit(1)
		}
		fmt.Println("releasecheck: codec.Typed decoded a JSON payload and refused a corrupt one for good")
	}
}

func roundTrip(ctx context.Context) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "chat", "chat-dlq"))
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := producer.New(producer.Config{Brokers: c.ListenAddrs(), Topic: "chat"})
	if err != nil {
		return err
	}
	defer p.Close()
	sent, err := p.Send(ctx, "chat-42", []byte("book a flight to London"))
	if err != nil {
		return err
	}
	handled := make(chan *consumer.Message, 1)
	cons, err := consumer.New(consumer.Config{Brokers: c.ListenAddrs(), Group: "release-check",
		Topics: []string{"chat"}, DeadLetterTopic: "chat-dlq"},
		consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			select {
			case handled <- m:
			default:
			}
			return nil
		}))
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(runCtx) }()
	var m *consumer.Message
	select {
	case m = <-handled:
	case <-ctx.Done():
	}
	stop()
	if err := <-errc; err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	switch {
	case m == nil:
		return fmt.Errorf("the message was not handled: %w", ctx.Err())
	case m.EventID != sent.EventID || m.SessionID != "chat-42":
		return fmt.Errorf("handled event %s of %q, sent %s of chat-42", m.EventID, m.SessionID, sent.EventID)
	}
	return nil
}
`

// kitProgram adds the lanestest round trip when lanestest is released.
const kitProgram = `package main

import (
	"context"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

func init() {
	kit = func(ctx context.Context) error {
		b, err := lanestest.NewBroker(2, "kit", "kit-dlq")
		if err != nil {
			return err
		}
		defer b.Close()
		l := lanestest.NewLedger()
		p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "kit"})
		if err != nil {
			return err
		}
		defer p.Close()
		if err := l.Send(ctx, p, "chat-42", 0, []byte("make it Paris")); err != nil {
			return err
		}
		c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "kit", Topics: []string{"kit"},
			DeadLetterTopic: "kit-dlq"}, l.Handler("m1", consumer.HandlerFunc(
			func(context.Context, *consumer.Message) error { return nil })))
		if err != nil {
			return err
		}
		if err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "kit-dlq"}); err != nil {
			return err
		}
		return l.Report().Err(false)
	}
}
`

// typedProgram adds the codec round trip when the codec module is
// released: JSON only, so the program must build no protobuf, Avro or
// schema-registry package (check verifies it).
const typedProgram = `package main

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	typed = func(ctx context.Context) error {
		type order struct {
			ID string ` + "`json:\"id\"`" + `
		}
		orders := codec.JSON[order]()
		b, err := orders.Encode(ctx, order{ID: "o-1"})
		if err != nil {
			return err
		}
		var got order
		h := codec.Typed(orders, func(_ context.Context, _ *consumer.Message, o order) error { got = o; return nil })
		if err := h.Handle(ctx, &consumer.Message{Record: &kgo.Record{Value: b}}); err != nil || got.ID != "o-1" {
			return fmt.Errorf("decoded %+v, %v", got, err)
		}
		if err := h.Handle(ctx, &consumer.Message{Record: &kgo.Record{Value: []byte("{")}}); !consumer.IsPermanent(err) {
			return fmt.Errorf("a corrupt payload: %v, want a permanent error", err)
		}
		return nil
	}
}
`
