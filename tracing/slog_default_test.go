package tracing

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestFromSlogDefault: lines go to slog.Default() as it is when they are
// logged: a default installed after FromSlogDefault gets them, at its
// level.
func TestFromSlogDefault(t *testing.T) {
	old := slog.Default()
	defer slog.SetDefault(old)
	l := FromSlogDefault()
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.Info().Msg("below the level")
	l.Warn().Str("broker", "127.0.0.1:1").Msg("cannot reach brokers")
	if got := buf.String(); strings.Contains(got, "below the level") ||
		!strings.Contains(got, "level=WARN") || !strings.Contains(got, `msg="cannot reach brokers" broker=127.0.0.1:1`) {
		t.Fatalf("the default installed after FromSlogDefault got:\n%s", got)
	}
}
