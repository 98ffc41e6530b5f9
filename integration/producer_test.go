package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/lanesdev/lanes/producer"
)

// TestProducerBrokerLimits: the broker's own refusals reach the caller as
// typed errors: a message over the broker's message.max.bytes (the
// producer allows more), and a topic that does not exist with automatic
// topic creation off.
func TestProducerBrokerLimits(t *testing.T) {
	c := newCluster(t)
	topic, _ := c.topics(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, MaxMessageBytes: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	noise := make([]byte, 2<<20) // incompressible: zeros would shrink below the limit
	_, _ = rand.Read(noise)
	if _, err := big.Send(ctx, "chat-1", noise); !errors.Is(err, producer.ErrTooLarge) {
		t.Errorf("2 MiB message: %v, want ErrTooLarge", err)
	}
	if _, err := big.Send(ctx, "chat-1", noise[:900<<10]); err != nil {
		t.Errorf("900 KiB message: %v", err)
	}
	missing, err := producer.New(producer.Config{Brokers: c.brokers, Topic: "lanes-no-such-topic", DeliveryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	if _, err := missing.Send(ctx, "chat-1", []byte("x")); !errors.Is(err, producer.ErrUnknownTopic) && !errors.Is(err, producer.ErrTimeout) {
		t.Errorf("unknown topic: %v, want ErrUnknownTopic", err)
	}
}
