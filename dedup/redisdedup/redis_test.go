package redisdedup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/dedup/redisdedup"
	"github.com/lanesdev/lanes/dedup/storetest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newStore(t *testing.T) dedup.Store {
	c := client(t, storetest.Server(t, "LANES_REDIS_ADDR", "Redis"))
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at LANES_REDIS_ADDR: %v", err)
	}
	s, err := redisdedup.New(redisdedup.Config{Client: c, Prefix: "lanes-test:"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore runs the store suite on a real Redis (LANES_REDIS_ADDR).
func TestStore(t *testing.T) { storetest.Run(t, newStore) }

func TestConfig(t *testing.T) {
	if _, err := redisdedup.New(redisdedup.Config{}); !errors.Is(err, redisdedup.ErrConfig) {
		t.Errorf("no client: %v, want ErrConfig", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := redisdedup.New(redisdedup.Config{Client: c, DoneTTL: -1}); !errors.Is(err, redisdedup.ErrConfig) {
		t.Errorf("negative DoneTTL: %v, want ErrConfig", err)
	}
}

// TestServerDown: with Redis unreachable, the attempt fails with
// dedup.ErrStore and the handler does not run: the consumer retries it.
func TestServerDown(t *testing.T) {
	c := client(t, "127.0.0.1:1") // nothing listens on port 1
	s, err := redisdedup.New(redisdedup.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dedup.New(dedup.Config{Store: s, Group: "g"})
	ran := false
	err = d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		ran = true
		return nil
	})).Handle(context.Background(), &consumer.Message{EventID: "e1"})
	if !errors.Is(err, dedup.ErrStore) || ran {
		t.Fatalf("error %v, ran %v: want dedup.ErrStore and no run", err, ran)
	}
}

func TestConnect(t *testing.T) {
	if _, err := redisdedup.Connect(context.Background(), "127.0.0.1:1", redisdedup.Config{}); err == nil {
		t.Fatal("connected to nothing")
	}
	s, err := redisdedup.Connect(context.Background(), storetest.Server(t, "LANES_REDIS_ADDR", "Redis"), redisdedup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
