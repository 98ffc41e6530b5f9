package consumer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTopicHandlers: each topic's records go to its own handler, every
// session keeps its order on each topic and never runs two records at once
// across the topics.
func TestTopicHandlers(t *testing.T) {
	e := newEnv(t, 3, "orders", "audit", "dlq")
	sessions := sessionNames(20)
	e.produce("orders", sessions, 5)
	e.produce("audit", sessions, 5)
	rec := newRecorder(2*len(sessions)*5, nil)
	var wrong atomic.Int64
	only := func(topic string) Handler {
		return HandlerFunc(func(ctx context.Context, m *Message) error {
			if m.Record.Topic != topic {
				wrong.Add(1)
			}
			return rec.Handle(ctx, m)
		})
	}
	c, err := New(e.config("g-topics", "orders", "audit"), TopicHandlers{"orders": only("orders"), "audit": only("audit")})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, c, rec.wait, 0)
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d records reached another topic's handler", n)
	}
	checkOrder(t, rec, []string{"orders", "audit"}, sessions, 5)
}

// TestTopicHandlersCheck: New names the consumed topic without a handler,
// a nil handler, or a handler for a topic not consumed.
func TestTopicHandlersCheck(t *testing.T) {
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"orders", "audit"}, DeadLetterTopic: "d"}
	for _, tc := range []struct {
		name string
		th   TopicHandlers
		want string // "" = valid
	}{
		{"every topic", TopicHandlers{"orders": h, "audit": h}, ""},
		{"missing", TopicHandlers{"orders": h}, `no handler for consumed topic "audit"`},
		{"nil", TopicHandlers{"orders": h, "audit": nil}, `no handler for consumed topic "audit"`},
		{"extra", TopicHandlers{"orders": h, "audit": h, "payments": h}, `handlers for ["payments"], not in Topics`},
	} {
		_, err := New(cfg, tc.th)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrConfig saying %s", tc.name, err, tc.want)
		}
	}
	err := TopicHandlers{}.Handle(context.Background(), &Message{Record: &kgoRecord{Topic: "x"}})
	if !IsPermanent(err) || !strings.Contains(err.Error(), "topic x") {
		t.Errorf("unknown topic: %v, want a permanent error naming it", err)
	}
}

// TestTopicHandlersNameTopics: with Config.Topics left empty, a
// TopicHandlers map's topics are the ones consumed.
func TestTopicHandlersNameTopics(t *testing.T) {
	ok := HandlerFunc(func(context.Context, *Message) error { return nil })
	c, err := New(Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", DeadLetterTopic: "dlq"},
		TopicHandlers{"orders": ok, "chats": ok})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.cfg.Topics; !slices.Equal(got, []string{"chats", "orders"}) {
		t.Fatalf("Topics %q; want the map's, sorted", got)
	}
}
