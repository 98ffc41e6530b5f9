package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer"
)

// Parking: a session whose record keeps failing moves, with its later
// records, to the park topic "chat-messages.park" (create it with the
// partition count of "chat-messages", cleanup.policy=delete), so the
// partition keeps flowing for every other session; it is retried from
// there every 30 s to 10 min, and its head is dead-lettered after 20
// retries, the rest of the session held until ReleaseParked.
func ExampleParkPolicy() {
	cfg := consumer.Config{
		Brokers:         []string{"127.0.0.1:9092"},
		Group:           "chat-service",
		Topics:          []string{"chat-messages"},
		DeadLetterTopic: "chat-messages-dlq",
		Park: consumer.ParkPolicy{Enabled: true, AfterAttempts: 5, After: 30 * time.Second,
			Delay: 30 * time.Second, MaxDelay: 10 * time.Minute, MaxAttempts: 20, OnExhausted: consumer.ParkHold},
	}
	_, err := consumer.New(cfg, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error { return nil }))
	fmt.Println(err)
	// Output: <nil>
}

// Park parks a record at once: the handler knows this session's
// dependency is down, so retrying in the lane would only wait.
func ExamplePark() {
	errAccountDown := errors.New("account service down")
	handle := func(ctx context.Context, m *consumer.Message) error {
		return consumer.Park(fmt.Errorf("session %s: %w", m.SessionID, errAccountDown))
	}
	err := handle(context.Background(), &consumer.Message{SessionID: "chat-7", Record: &kgo.Record{}})
	fmt.Println(consumer.IsPark(err), errors.Is(err, errAccountDown))
	// Output: true true
}
