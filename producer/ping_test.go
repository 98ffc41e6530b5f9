package producer

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// freeAddr returns a local host:port where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestPing: Ping says whether a broker answers and whether Config.Topic
// and the topics named exist, with an error a service can branch on that
// names what is wrong; after Close it says so.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := cluster(t, 1, "chat", "audit")

	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat"})
	if err := p.Ping(ctx, "audit"); err != nil {
		t.Fatalf("Ping with every topic in place: %v", err)
	}
	err := p.Ping(ctx, "audit", "orders")
	if !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), "orders") ||
		strings.Contains(err.Error(), "audit") || strings.Contains(err.Error(), "chat,") {
		t.Fatalf("Ping with a missing topic: %v; want ErrUnknownTopic naming orders only", err)
	}
	q := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chats"})
	if err := q.Ping(ctx); !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), "chats") {
		t.Fatalf("Ping with Config.Topic missing: %v; want ErrUnknownTopic naming chats", err)
	}
	p.Close()
	if err := p.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after Close: %v; want ErrClosed", err)
	}

	addr := freeAddr(t)
	gone := newProducer(t, Config{Brokers: []string{addr}, Topic: "chat"})
	err = gone.Ping(ctx)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Ping with no broker listening: %v; want ErrUnreachable naming %s and the dial error", err, addr)
	}
}
