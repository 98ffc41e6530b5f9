package dedup_test

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The dedup middleware in front of a handler: an event delivered twice (a
// redelivery after a crash before the offset commit) is charged once. In a
// consumer, pass once.Middleware in consumer.Config.Middleware.
func Example() {
	store, err := dedup.NewMemory(dedup.MemoryConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	once, err := dedup.New(dedup.Config{Store: store, Group: "payments"})
	if err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	h := once.Middleware(consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		charges++
		return nil
	}))
	m := &consumer.Message{Record: &kgo.Record{Topic: "orders"}, SessionID: "order-7", EventID: "0190f1c2-7d1e-7abc-8def-0123456789ab"}
	for range 2 {
		if err := h.Handle(context.Background(), m); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Printf("charged %d time(s), skipped %d\n", charges, once.Stats().Skipped)
	// Output: charged 1 time(s), skipped 1
}
