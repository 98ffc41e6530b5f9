// Package chat is the chat service of docs/tutorial.md: Post sends a
// message of a chat with the lanes producer; a lanes consumer applies each
// message once (dedup), in order per chat, to the chat's history, and sends
// the ones it cannot apply to the dead-letter topic.
package chat

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/producer"
)

// Topic carries the chats, one session per chat; DeadLetters the messages
// that could not be applied.
const (
	Topic       = "chat"
	DeadLetters = "chat-dlq"
)

// Service is a chat backend.
type Service struct {
	Producer *producer.Producer
	Consumer *consumer.Consumer
	mu       sync.Mutex
	history  map[string][]string
}

// New connects to brokers; middleware runs inside dedup (a test's ledger).
func New(brokers []string, middleware ...consumer.Middleware) (*Service, error) {
	store, err := dedup.NewMemory(dedup.MemoryConfig{})
	if err != nil {
		return nil, err
	}
	d, err := dedup.New(dedup.Config{Store: store})
	if err != nil {
		return nil, err
	}
	s := &Service{history: map[string][]string{}}
	if s.Producer, err = producer.New(producer.Config{Brokers: brokers, Topic: Topic}); err != nil {
		return nil, err
	}
	s.Consumer, err = consumer.New(consumer.Config{Brokers: brokers, Group: "chat", Topics: []string{Topic},
		DeadLetterTopic: DeadLetters, Middleware: append([]consumer.Middleware{d.Middleware}, middleware...),
		MaxConcurrency: 20}, // handlers at once: the size of the connection pool they would share
		consumer.HandlerFunc(s.apply))
	if err != nil {
		s.Producer.Close()
		return nil, err
	}
	return s, nil
}

// Post sends text to a chat; it returns once the broker has it.
func (s *Service) Post(ctx context.Context, chat, text string) error {
	_, err := s.Producer.Send(ctx, chat, []byte(text))
	return err
}

func (s *Service) apply(ctx context.Context, m *consumer.Message) error {
	if len(m.Record.Value) == 0 {
		return consumer.Permanent(errors.New("empty message")) // to chat-dlq
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history[m.SessionID] = append(s.history[m.SessionID], string(m.Record.Value))
	return nil // an error instead would be retried, holding this chat only
}

// History returns a chat's messages, in the order they were posted.
func (s *Service) History(chat string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.history[chat]...)
}

// Run consumes until ctx ends, serving /livez and /readyz on addr.
func (s *Service) Run(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: s.Consumer.HealthHandler()}
	go srv.ListenAndServe()
	defer srv.Close()
	return s.Consumer.Run(ctx)
}

// Close closes the producer (Run closes the consumer).
func (s *Service) Close() { s.Producer.Close() }
