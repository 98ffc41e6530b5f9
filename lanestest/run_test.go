package lanestest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
)

// TestSendToTopics: Send and SendAsync pass the producer's send options
// on, so a session sent to two topics is recorded as sent, each message
// on the topic it was sent to, and a consumer reading both with
// TopicHandlers accounts for every one under RunOptions.
func TestSendToTopics(t *testing.T) {
	b, err := NewBroker(2, "orders", "audit", "orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "orders", Slog: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	l := NewLedger()
	topicOf := func(seq int) string { return map[bool]string{true: "orders", false: "audit"}[seq%2 == 0] }
	for seq := range 4 { // one sequence across both topics
		if err := l.Send(ctx, p, "cart-7", seq, []byte("v"), producer.WithTopic(topicOf(seq)),
			producer.WithHeader("origin", []byte("test"))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	for seq := 4; seq < 6; seq++ {
		l.SendAsync(ctx, p, "cart-7", seq, []byte("v"), func(err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		}, producer.WithTopic(topicOf(seq)))
	}
	wg.Wait()
	if n := l.AckedCount(); n != 6 {
		t.Fatalf("AckedCount = %d, want 6", n)
	}

	var mu sync.Mutex
	seen := map[string]int{} // topic → messages whose origin header arrived
	h := func(topic string) consumer.Handler {
		return consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			if m.Record.Topic != topic {
				return consumer.Permanent(errors.New("handed to the handler of " + topic))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, hd := range m.Record.Headers {
				if hd.Key == "origin" {
					seen[topic]++
				}
			}
			return nil
		})
	}
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "g", Topics: []string{"orders", "audit"},
		DeadLetterTopic: "orders-dlq", Slog: quiet}, l.Handler("m1", consumer.TopicHandlers{"orders": h("orders"), "audit": h("audit")}))
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, c, l, RunOptions{Broker: b, DeadLetterTopic: "orders-dlq"}); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	if err := r.Err(false); err != nil || r.Messages != 6 || r.Sessions != 1 || r.DeadLettered != 0 || r.Duplicates != 0 {
		t.Fatalf("report %v (%v), want 6 messages of one session, clean", r, r.Details)
	}
	calls, _, _ := l.snapshot()
	for _, c := range calls {
		if want := topicOf(l.sent[c.EventID].seq); c.Topic != want {
			t.Errorf("seq %d handled on %s, sent to %s", l.sent[c.EventID].seq, c.Topic, want)
		}
	}
	if seen["orders"] != 2 || seen["audit"] != 2 { // the synchronous sends carried the header
		t.Errorf("records with the origin header: %v, want 2 per topic", seen)
	}
}

// TestRunOptions: Want waits for that many messages (not every one
// acknowledged); a bad option is refused before anything runs.
func TestRunOptions(t *testing.T) {
	b, err := NewBroker(1, "chat")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "chat", Slog: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := NewLedger()
	for seq := range 3 {
		if err := l.Send(ctx, p, "chat-1", seq, []byte("hi")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		o    RunOptions
		want string
	}{
		{RunOptions{Want: -1}, "RunOptions.Want -1"},
		{RunOptions{DeadLetterTopic: "chat-dlq"}, `RunOptions.DeadLetterTopic "chat-dlq" needs RunOptions.Broker`},
	} {
		if err := Run(ctx, nil, l, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}

	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "g", Topics: []string{"chat"}, Slog: quiet,
		Retry: consumer.RetryPolicy{Forever: true}}, l.Handler("m1", consumer.HandlerFunc(
		func(context.Context, *consumer.Message) error { return nil })))
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, c, l, RunOptions{Want: 1}); err != nil {
		t.Fatal(err)
	}
	if got := l.Accounted(); got < 1 {
		t.Fatalf("Accounted = %d after Run with Want 1", got)
	}
	for seq := 3; seq < 6; seq++ { // sent after the first run: the zero RunOptions waits for them
		if err := l.Send(ctx, p, "chat-1", seq, []byte("hi")); err != nil {
			t.Fatal(err)
		}
	}
	c, err = consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "g", Topics: []string{"chat"}, Slog: quiet,
		Retry: consumer.RetryPolicy{Forever: true}}, l.Handler("m1", consumer.HandlerFunc(
		func(context.Context, *consumer.Message) error { return nil })))
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, c, l, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := l.Accounted(); got != 6 {
		t.Fatalf("Accounted = %d after Run with the zero RunOptions, want 6", got)
	}
	if err := l.Report().Err(false); err != nil {
		t.Fatal(err)
	}
}

// quiet keeps the consumers' INFO lines out of the test log.
var quiet = slog.New(slog.DiscardHandler)
