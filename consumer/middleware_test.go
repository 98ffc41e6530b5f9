package consumer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestMiddlewareOrder: the first entry of Config.Middleware is the
// outermost; every attempt goes through the whole chain and its errors are
// the handler's.
func TestMiddlewareOrder(t *testing.T) {
	var trace []string
	mark := func(name string) Middleware {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, m *Message) error {
				trace = append(trace, name+">")
				err := next.Handle(ctx, m)
				trace = append(trace, "<"+name)
				return err
			})
		}
	}
	boom := errors.New("boom")
	cfg := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "dlq",
		Middleware: []Middleware{mark("a"), mark("b")}}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		trace = append(trace, "h")
		return boom
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.h.Handle(context.Background(), &Message{}); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the handler's", err)
	}
	if want := []string{"a>", "b>", "h", "<b", "<a"}; !slices.Equal(trace, want) {
		t.Fatalf("calls %v, want %v", trace, want)
	}
}

func TestMiddlewareNil(t *testing.T) {
	cfg := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "dlq"}
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	for name, mw := range map[string][]Middleware{
		"nil entry":   {nil},
		"nil handler": {func(Handler) Handler { return nil }},
	} {
		cfg.Middleware = mw
		if _, err := New(cfg, h); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Middleware") {
			t.Errorf("%s: error %v, want ErrConfig naming Middleware", name, err)
		}
	}
}
