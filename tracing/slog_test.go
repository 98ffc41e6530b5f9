package tracing

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestFromSlog: zerolog lines reach the slog handler with their message,
// level and fields (in order, typed); lines below its level do not.
func TestFromSlog(t *testing.T) {
	var buf bytes.Buffer
	l := FromSlog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Debug().Str("topic", "chats").Msg("left out")
	l.Warn().Str("topic", "chats").Int32("partition", 3).Int64("offset", 42).Float64("ratio", 0.5).
		Strs("brokers", []string{"a:1", "b:2"}).Err(errors.New("boom")).Msg("record dead-lettered")
	l.Error().Msg("second")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (debug left out):\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "WARN", "msg": "record dead-lettered", "topic": "chats",
		"partition": 3.0, "offset": 42.0, "ratio": 0.5, "error": "boom"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, got[k], got[k], v)
		}
	}
	if b, _ := got["brokers"].([]any); len(b) != 2 || b[0] != "a:1" {
		t.Errorf("brokers = %v", got["brokers"])
	}
	if i := strings.Index(lines[0], `"topic"`); i < 0 || i > strings.Index(lines[0], `"partition"`) {
		t.Errorf("fields out of order: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"level":"ERROR"`) {
		t.Errorf("error line: %s", lines[1])
	}
}

// TestFromSlogLevels: the zerolog logger's own level follows the
// handler's, so lines below it are not even built; nil is disabled.
func TestFromSlogLevels(t *testing.T) {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		l := FromSlog(slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: lv})))
		for _, e := range []struct {
			lv slog.Level
			ev *zerolog.Event
		}{{slog.LevelDebug, l.Debug()}, {slog.LevelInfo, l.Info()}, {slog.LevelWarn, l.Warn()}, {slog.LevelError, l.Error()}} {
			if e.ev.Enabled() != (e.lv >= lv) {
				t.Errorf("handler level %v: a %v event is built: %v", lv, e.lv, e.ev.Enabled())
			}
		}
	}
	if nop := FromSlog(nil); nop.Error().Enabled() {
		t.Error("FromSlog(nil) logs")
	}
}
