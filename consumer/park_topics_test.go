package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestParkTopicsWatched: with parking on, Ping and the topic watch cover
// the park topics: a missing one fails Ping (ErrTopicMissing naming it),
// is named in Health with what to do, and logged; the reason clears once
// the topic is created.
func TestParkTopicsWatched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	e := newEnv(t, 1, "chats", "dlq")
	logs := newLogCapture()
	cfg := e.config("g-park-topics", "chats")
	cfg.Logger = &logs.log
	cfg.Park.Enabled = true
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrTopicMissing) || !strings.Contains(err.Error(), "chats.park") {
		t.Fatalf("Ping without the park topic: %v; want ErrTopicMissing naming chats.park", err)
	}
	stop := start(t, c)
	parkReason := func() string {
		for _, r := range c.Health().Reasons {
			if strings.HasPrefix(r, "park topics missing since ") {
				return r
			}
		}
		return ""
	}
	eventually(t, "the missing park topic in Health", func() bool { return parkReason() != "" })
	if r := parkReason(); !strings.Contains(r, "[chats.park]") || !strings.Contains(r, "cleanup.policy=delete") {
		t.Fatalf("reason %q; want it naming chats.park and how to create it", r)
	}
	warned := false
	for _, l := range logs.lines("park topics missing") {
		warned = warned || l["level"] == "warn" && containsStr(l["topics"], "chats.park")
	}
	if !warned {
		t.Fatalf("no warning naming chats.park:\n%s", logs)
	}
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 1, 1, nil, "chats.park"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reason cleared", func() bool { return parkReason() == "" })
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping with the park topic: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
