package tracing

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"
)

// TestFromSlogUint64: a uint64 field above MaxInt64 (zerolog's Uint64, a
// hash, an ID) reaches slog exact, not rounded through float64.
func TestFromSlogUint64(t *testing.T) {
	var buf bytes.Buffer
	l := FromSlog(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Info().Uint64("hash", math.MaxUint64-1).Msg("m")
	if !strings.Contains(buf.String(), "hash=18446744073709551614") {
		t.Fatalf("uint64 field lost precision: %s", buf.String())
	}
}

// TestFromSlogLevelVar: a handler on a slog.LevelVar whose level is
// lowered after FromSlog (turning debug on at run time, a common use)
// gets the lines it now enables.
func TestFromSlogLevelVar(t *testing.T) {
	var buf bytes.Buffer
	var lv slog.LevelVar // Info
	l := FromSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: &lv})))
	lv.Set(slog.LevelDebug)
	l.Debug().Msg("now enabled")
	if !strings.Contains(buf.String(), "now enabled") {
		t.Fatalf("debug line dropped after the handler's LevelVar was lowered: %q", buf.String())
	}
}

// TestFromSlogMalformed: a line that is not valid JSON (a RawJSON field
// holding bad JSON) still reaches the handler, as its raw text, instead
// of being dropped with a note on stderr.
func TestFromSlogMalformed(t *testing.T) {
	var buf bytes.Buffer
	l := FromSlog(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Warn().RawJSON("payload", []byte("{not json")).Msg("partition held")
	if !strings.Contains(buf.String(), "partition held") || !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("malformed line lost: %q", buf.String())
	}
}
