package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPing: before Run, Ping says whether the brokers answer and the
// consumed and dead-letter topics exist, with an error a service can
// branch on that names what is wrong.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	e := newEnv(t, 1, "chats", "dlq")
	ping := func(brokers []string, topics []string, dlq string) error {
		t.Helper()
		cfg := e.config("g-ping", topics...)
		cfg.Brokers, cfg.DeadLetterTopic = brokers, dlq
		c, err := New(cfg, nopHandler())
		if err != nil {
			t.Fatal(err)
		}
		return c.Ping(ctx)
	}

	if err := ping(e.addrs, []string{"chats"}, "dlq"); err != nil {
		t.Fatalf("Ping with everything in place: %v", err)
	}

	err := ping(e.addrs, []string{"chats", "orders"}, "audit-dlq")
	if !errors.Is(err, ErrTopicMissing) || !strings.Contains(err.Error(), "orders") || !strings.Contains(err.Error(), "audit-dlq") ||
		strings.Contains(err.Error(), "chats") {
		t.Fatalf("Ping with missing topics: %v; want ErrTopicMissing naming orders and audit-dlq only", err)
	}

	addr := freeAddr(t)
	began := time.Now()
	err = ping([]string{addr}, []string{"chats"}, "dlq")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Ping with no broker listening: %v; want ErrUnreachable naming %s and the dial error", err, addr)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("Ping took %v to report refused connections", d)
	}
}

// TestRunUnreachableError: Run's error after a cancel, when no broker ever
// answered, wraps ErrUnreachable.
func TestRunUnreachableError(t *testing.T) {
	c, err := New(Config{Brokers: []string{freeAddr(t)}, Group: "g", Topics: []string{"chats"}, DeadLetterTopic: "dlq"}, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the unreachable reason", func() bool {
		return strings.Contains(strings.Join(c.Health().Reasons, "\n"), "cannot reach brokers")
	})
	if err := stop(); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Run: %v; want ErrUnreachable", err)
	}
}
