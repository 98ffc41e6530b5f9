// Command chat runs the tutorial's chat service (docs/tutorial.md): it
// creates the topics, then posts each line of its input, "chat-42: hello",
// and prints each message as the consumer applies it, until Ctrl-C or
// SIGTERM.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"example.com/chat"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done() // the first Ctrl-C or SIGTERM: Run drains, commits, leaves
		stop()       // from now on a second one ends the process at once
		fmt.Fprintln(os.Stderr, "chat: stopping; Ctrl-C again to quit at once")
	}()
	brokers := strings.Split(envOr("KAFKA_BROKERS", "127.0.0.1:9092"), ",")
	if err := createTopics(ctx, brokers, chat.Topic, chat.DeadLetters); err != nil {
		fail(err)
	}
	s, err := chat.New(brokers, printApplied)
	if err != nil {
		fail(err)
	}
	defer s.Close()
	go post(ctx, s)
	if err := s.Run(ctx, envOr("HEALTH_ADDR", "127.0.0.1:8080")); err != nil { // /livez, /readyz
		fail(err)
	}
}

// post sends each input line "chat: text".
func post(ctx context.Context, s *chat.Service) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		id, text, _ := strings.Cut(in.Text(), ":")
		if err := s.Post(ctx, strings.TrimSpace(id), strings.TrimSpace(text)); err != nil {
			fmt.Fprintln(os.Stderr, "post:", err)
		}
	}
}

// printApplied is middleware (it runs around the handler, inside dedup):
// it prints what became of each message.
func printApplied(next consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		err := next.Handle(ctx, m)
		switch {
		case err == nil:
			fmt.Printf("%s: applied %q\n", m.SessionID, m.Record.Value)
		case consumer.IsPermanent(err):
			fmt.Printf("%s: not applied, to %s (%v)\n", m.SessionID, chat.DeadLetters, err)
		}
		return err // another error is retried: the chat waits
	})
}

// createTopics creates the topics, 12 partitions each, unless they exist.
func createTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 12, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %v on %v: %w", topics, brokers, err)
	}
	for _, t := range resp.Sorted() {
		if t.Err != nil && !errors.Is(t.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s on %v: %w", t.Topic, brokers, t.Err)
		}
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chat:", err)
	os.Exit(1)
}
