package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func nopHandler() Handler {
	return HandlerFunc(func(context.Context, *Message) error { return nil })
}

// TestUnreachableBrokers: with Brokers where nothing listens, the first
// failed dial already makes readyz say so (naming the broker and the
// error), lanes warns once (not once per retry), franz-go's own warnings
// reach the lanes logger, and Run, cancelled, returns an error naming the
// brokers and the last error instead of nil. The same holds with the
// lines sent to a log/slog logger (Config.Slog).
func TestUnreachableBrokers(t *testing.T) {
	for _, kind := range []string{"zerolog", "slog"} {
		t.Run(kind, func(t *testing.T) { testUnreachableBrokers(t, kind) })
	}
}

func testUnreachableBrokers(t *testing.T, kind string) {
	addr := freeAddr(t)
	logs := newLogCapture()
	dials := newDialCounter()
	cfg := Config{
		Brokers: []string{addr}, Group: "g-unreachable", Topics: []string{"chats"}, DeadLetterTopic: "dlq",
		ClientOptions: []kgo.Opt{kgo.WithHooks(dials)},
	}
	if kind == "slog" {
		cfg.Slog = logs.slog()
	} else {
		cfg.Logger = &logs.log
	}
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	stop := start(t, c)

	eventually(t, "a failed dial", func() bool { return dials.failed.Load() >= 1 })
	// lanes' hook runs before the user's: the first failure is already known.
	if code, body := p.readyz(); !notReadyWith("cannot reach brokers ["+addr+"] since ", "connection refused")(code, body) {
		t.Fatalf("readyz after the first failed dial: %d %q", code, body)
	}
	eventually(t, "three failed dials", func() bool { return dials.failed.Load() >= 3 })
	warns := logs.lines("cannot reach brokers")
	if len(warns) != 1 {
		t.Fatalf("%d warnings about the brokers after %d failed dials, want 1:\n%s", len(warns), dials.failed.Load(), logs)
	}
	if w := warns[0]; w["level"] != "warn" || !containsStr(w["brokers"], addr) ||
		!strings.Contains(w["error"].(string), "connection refused") {
		t.Fatalf("warning %v: want level warn, the broker and the error", w)
	}
	franz := logs.where(func(m map[string]any) bool { return m["source"] == "franz-go" })
	if len(franz) == 0 {
		t.Fatalf("no franz-go line reached the lanes logger:\n%s", logs)
	}
	for _, m := range franz {
		if m["level"] != "warn" && m["level"] != "error" {
			t.Fatalf("franz-go line below warn: %v", m)
		}
	}

	err = stop()
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Run after cancel, never having reached a broker: %v; want an error naming %s and the dial error", err, addr)
	}
}

// TestBrokersReachedLater: the unreachable reason clears once a broker
// answers (a broker started late on the configured address); lanes logs
// that it reached them, the consumer becomes ready, and Run returns nil.
func TestBrokersReachedLater(t *testing.T) {
	addr := freeAddr(t)
	logs := newLogCapture()
	c, err := New(Config{
		Brokers: []string{addr}, Group: "g-late", Topics: []string{"chats"}, DeadLetterTopic: "dlq",
		Logger: &logs.log, CommitInterval: 50 * time.Millisecond,
	}, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	stop := start(t, c)
	p.awaitReadyz("the unreachable reason", testTimeout, notReadyWith("cannot reach brokers ["+addr+"]"))

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(portOf(t, addr)), kfake.SeedTopics(1, "chats", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	p.awaitReadyz("ready", testTimeout, ready)
	if infos := logs.lines("reached brokers"); len(infos) != 1 || infos[0]["level"] != "info" {
		t.Fatalf("want one info line on reaching the brokers, got %v\n%s", infos, logs)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestClosingDialIsNoOutage: a dial cut short because the client is
// closing (Run cancelled before any broker answered) says nothing about the
// brokers: it starts no outage, no readiness reason, and Run's error stays
// nil. A refused dial still does.
func TestClosingDialIsNoOutage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		unreach bool
	}{
		{"client closed", fmt.Errorf("unable to dial: %w", kgo.ErrClientClosed), false},
		{"dial cancelled", fmt.Errorf("unable to dial: %w", context.Canceled), false},
		{"refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := zerolog.Nop()
			w := newBrokerWatch([]string{"127.0.0.1:1"}, &log)
			w.OnBrokerConnect(kgo.BrokerMetadata{Host: "127.0.0.1", Port: 1}, 0, nil, tc.err)
			err := w.neverReached()
			if got := errors.Is(err, ErrUnreachable); got != tc.unreach {
				t.Fatalf("neverReached after %q: %v, want unreachable %v", tc.err, err, tc.unreach)
			}
			if got := w.reason() != ""; got != tc.unreach {
				t.Fatalf("reason after %q: %q, want one %v", tc.err, w.reason(), tc.unreach)
			}
		})
	}
}
