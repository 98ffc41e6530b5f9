package producer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// jsonLines decodes a JSON slog handler's lines.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestWrongAddressLogged: with nothing listening at Brokers, franz-go's
// dial warnings reach the producer's logger (source=franz-go,
// client=producer), and the sends that then time out are logged at Warn
// once, not once each: the rest are counted as suppressed, at Debug.
func TestWrongAddressLogged(t *testing.T) {
	var buf syncBuffer
	addr := freeAddr(t)
	p := newProducer(t, Config{Brokers: []string{addr}, Topic: "chat", DeliveryTimeout: time.Second,
		Slog: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	for i := range 3 {
		if _, err := p.Send(ctx, "chat-42", []byte("x")); !errors.Is(err, ErrTimeout) {
			t.Fatalf("send %d to %s: %v; want ErrTimeout", i, addr, err)
		}
	}
	var franz, warned, debug int
	for _, m := range jsonLines(t, buf.String()) {
		msg, _ := m["msg"].(string)
		switch {
		case m["source"] == "franz-go":
			franz++
			if m["client"] != "producer" || (m["level"] != "WARN" && m["level"] != "ERROR") {
				t.Errorf("franz-go line %v: want client producer, level WARN or ERROR", m)
			}
		case strings.HasPrefix(msg, "send failed: not acknowledged within DeliveryTimeout") && m["level"] == "WARN":
			warned++
			if m["topic"] != "chat" || m["session"] != "chat-42" || !strings.Contains(m["error"].(string), "timed out") {
				t.Errorf("warning %v: want the topic, the session and the error", m)
			}
		case strings.HasPrefix(msg, "send failed: ") && m["level"] == "DEBUG":
			debug++
		}
	}
	if franz == 0 || warned != 1 || debug != 2 {
		t.Fatalf("%d franz-go lines (want some), %d send warnings (want 1), %d at debug (want 2):\n%s", franz, warned, debug, buf.String())
	}
}

// TestDefaultLogger: a producer given no logger logs to slog.Default(),
// as it is when each line is logged (installed after New here).
func TestDefaultLogger(t *testing.T) {
	old := slog.Default()
	defer slog.SetDefault(old)
	c := cluster(t, 1, "chat")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), DeliveryTimeout: time.Second})
	var buf syncBuffer
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	if _, err := p.Send(context.Background(), "s-1", []byte("x"), WithTopic("no-such-topic")); err == nil {
		t.Fatal("send to a missing topic succeeded")
	}
	if got := buf.String(); !strings.Contains(got, `"level":"WARN","msg":"send failed: `) || !strings.Contains(got, `"topic":"no-such-topic"`) {
		t.Fatalf("slog.Default() got %q: want the failed send at Warn", got)
	}
}
