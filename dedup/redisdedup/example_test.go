package redisdedup_test

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/dedup/redisdedup"
	"github.com/redis/go-redis/v9"
)

// A payments consumer whose handler runs once per event ID across its
// members, with the claims in Redis. (Not run: it needs a Redis server.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisdedup.New(redisdedup.Config{Client: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	once, err := dedup.New(dedup.Config{Store: store, Group: "payments"})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := consumer.New(consumer.Config{
		Brokers: []string{"127.0.0.1:9092"}, Group: "payments", Topics: []string{"orders"},
		DeadLetterTopic: "orders-dlq",
		Middleware:      []consumer.Middleware{once.Middleware},
	}, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		return charge(ctx, m.SessionID, m.Record.Value) // repeated only if the process dies between charge and mark
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Run(context.Background())
	fmt.Printf("skipped %d duplicate deliveries\n", once.Stats().Skipped)
}

func charge(context.Context, string, []byte) error { return nil }
