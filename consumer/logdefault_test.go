package consumer

import (
	"log/slog"
	"strings"
	"testing"
)

// TestDefaultLogger: a consumer given no logger logs to slog.Default(),
// as it is when each line is logged (installed after New here): a broker
// that cannot be reached is reported there, not in silence.
func TestDefaultLogger(t *testing.T) {
	logs := newLogCapture()
	old := slog.Default()
	defer slog.SetDefault(old)
	addr := freeAddr(t)
	c, err := New(Config{Brokers: []string{addr}, Group: "g-default-log", Topics: []string{"chats"}, DeadLetterTopic: "dlq"}, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	slog.SetDefault(logs.slog())
	stop := start(t, c)
	eventually(t, "the unreachable warning in slog.Default()", func() bool { return len(logs.lines("cannot reach brokers")) > 0 })
	_ = stop()
	w := logs.lines("cannot reach brokers")[0]
	if w["level"] != "warn" || !containsStr(w["brokers"], addr) || !strings.Contains(w["error"].(string), "connection refused") {
		t.Fatalf("warning %v: want level warn, the broker and the error", w)
	}
}
