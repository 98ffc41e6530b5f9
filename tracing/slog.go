package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// FromSlog returns a zerolog logger whose lines go to l's handler: the
// message as the record's message, zerolog's level as the slog level, and
// every other field as an attribute, in order (numbers as int64, uint64 or
// float64, objects and arrays as decoded JSON). A line the handler does not
// take at its level is dropped before it is built; the handler is asked at
// each line, so one on a slog.LevelVar may change its level at run time.
// lanes logs through zerolog; the consumer and producer use FromSlog for a
// Config.Slog, so a service on log/slog writes no adapter. A nil l gives a
// disabled logger.
func FromSlog(l *slog.Logger) zerolog.Logger {
	if l == nil {
		return zerolog.Nop()
	}
	h := l.Handler()
	return zerolog.New(slogWriter{h}).Level(zerolog.TraceLevel).Sample(handlerLevel{h})
}

// handlerLevel asks the handler, before a zerolog event is built, whether
// it takes the event's level now: a handler on a slog.LevelVar may be
// lowered or raised at any time. (WriteLevel asks again: a logger whose
// sampler was replaced still writes only what the handler takes.)
type handlerLevel struct{ h slog.Handler }

func (s handlerLevel) Sample(lvl zerolog.Level) bool {
	return s.h.Enabled(context.Background(), slogLevel(lvl))
}

// slogWriter is a zerolog.LevelWriter that turns each JSON line into a
// slog record.
type slogWriter struct{ h slog.Handler }

func (w slogWriter) Write(p []byte) (int, error) { return w.WriteLevel(zerolog.NoLevel, p) }

func (w slogWriter) WriteLevel(zl zerolog.Level, p []byte) (int, error) {
	ctx := context.Background()
	lv := slogLevel(zl)
	if !w.h.Enabled(ctx, lv) {
		return len(p), nil
	}
	msg, attrs, err := decodeLine(p)
	if err != nil {
		// Not valid JSON (a RawJSON field holding bad JSON): the line
		// still goes out, whole, as the message, saying why.
		msg = string(bytes.TrimSpace(p))
		attrs = []slog.Attr{slog.String("log_decode_error", err.Error())}
	}
	r := slog.NewRecord(time.Now(), lv, msg, 0)
	r.AddAttrs(attrs...)
	return len(p), w.h.Handle(ctx, r)
}

// decodeLine splits a zerolog JSON line into its message and the other
// fields, keeping their order; level and time are the record's own.
func decodeLine(p []byte) (string, []slog.Attr, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", nil, fmt.Errorf("not a JSON object: %q", p)
	}
	var msg string
	var attrs []slog.Attr
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", nil, err
		}
		key, _ := t.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", nil, err
		}
		switch key {
		case zerolog.MessageFieldName:
			msg, _ = v.(string)
		case zerolog.LevelFieldName, zerolog.TimestampFieldName:
		default:
			attrs = append(attrs, slog.Any(key, plainValue(v)))
		}
	}
	return msg, attrs, nil
}

// plainValue turns a json.Number into an int64, a uint64 above MaxInt64,
// or a float64 when it is not an integer.
func plainValue(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		return u // a uint64 above MaxInt64: exact, not rounded through float64
	}
	f, _ := n.Float64()
	return f
}

// slogLevel maps zerolog's levels onto slog's (a line with no level is
// Info).
func slogLevel(l zerolog.Level) slog.Level {
	switch {
	case l <= zerolog.DebugLevel:
		return slog.LevelDebug
	case l == zerolog.InfoLevel, l == zerolog.NoLevel:
		return slog.LevelInfo
	case l == zerolog.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}
