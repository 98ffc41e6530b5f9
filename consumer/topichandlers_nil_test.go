package consumer

import (
	"context"
	"errors"
	"testing"
)

// TestTopicHandlersNilFunc: a HandlerFunc(nil) is a nil handler too: New
// refuses it (a typed nil in the map passes the == nil check and panics on
// every record, each one retried and dead-lettered as a panic).
func TestTopicHandlersNilFunc(t *testing.T) {
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	var none HandlerFunc
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"orders", "audit"}, DeadLetterTopic: "d"}
	if _, err := New(cfg, TopicHandlers{"orders": h, "audit": none}); !errors.Is(err, ErrConfig) {
		t.Fatalf("HandlerFunc(nil) for audit: %v, want ErrConfig", err)
	}
}
