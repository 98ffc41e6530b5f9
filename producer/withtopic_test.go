package producer

import (
	"context"
	"errors"
	"testing"
)

// TestWithTopicEmpty: WithTopic("") (a topic name read from an unset
// variable, say) is bad input: a clear error, not a silent send to
// Config.Topic.
func TestWithTopicEmpty(t *testing.T) {
	c := cluster(t, 1, "chat")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat"})
	res, err := p.Send(context.Background(), "s", []byte("x"), WithTopic(""))
	if !errors.Is(err, ErrNoTopic) {
		t.Fatalf("WithTopic(\"\"): sent to partition %d of Config.Topic (err %v); want ErrNoTopic", res.Partition, err)
	}
}
