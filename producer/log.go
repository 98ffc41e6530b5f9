package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logRepeatEvery is how often one repeated line (a franz-go message, a
// send failing the same way) is logged at most; the next one logged says
// how many were suppressed.
const logRepeatEvery = 30 * time.Second

// logLimiter lets a line with a given key through at most once per
// logRepeatEvery. Its keys must come from a small set (a franz-go message,
// a topic and a kind of failure): it keeps one entry per key.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]*logSeen
}

type logSeen struct {
	at         time.Time
	suppressed int
}

// allow reports whether the line keyed k may be logged now, and how many
// were suppressed since the last one logged.
func (l *logLimiter) allow(k string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]*logSeen{}
	}
	s := l.last[k]
	if s == nil {
		l.last[k] = &logSeen{at: now}
		return true, 0
	}
	if now.Sub(s.at) < logRepeatEvery {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.at, s.suppressed = now, 0
	return true, n
}

// kgoLogger passes franz-go's warnings and errors to the producer's
// logger with source=franz-go and client=producer: a broker that cannot be
// dialled is said at once, not only when sends time out. Its info and
// debug lines (one per request) are left out; a message repeated, as a
// failing dial is on every retry, is logged at most once per
// logRepeatEvery, with the number suppressed meanwhile.
type kgoLogger struct {
	log   *zerolog.Logger
	limit logLimiter
}

// Level follows the producer's logger: warn, or error, or nothing when
// that is all it logs.
func (k *kgoLogger) Level() kgo.LogLevel {
	switch lvl := max(k.log.GetLevel(), zerolog.GlobalLevel()); {
	case lvl <= zerolog.WarnLevel:
		return kgo.LogLevelWarn
	case lvl == zerolog.ErrorLevel:
		return kgo.LogLevelError
	default:
		return kgo.LogLevelNone
	}
}

func (k *kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level != kgo.LogLevelWarn && level != kgo.LogLevelError {
		return
	}
	ok, suppressed := k.limit.allow(msg, time.Now())
	if !ok {
		return
	}
	e := k.log.Warn()
	if level == kgo.LogLevelError {
		e = k.log.Error()
	}
	if e == nil {
		return
	}
	e = e.Str("source", "franz-go").Str("client", "producer")
	if suppressed > 0 {
		e = e.Int("suppressed", suppressed)
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, _ := keyvals[i].(string)
		switch v := keyvals[i+1].(type) {
		case error:
			e = e.AnErr(key, v)
		case string:
			e = e.Str(key, v)
		case int:
			e = e.Int(key, v)
		case int32:
			e = e.Int32(key, v)
		case int64:
			e = e.Int64(key, v)
		default: // durations too, as "1.5s"
			e = e.Str(key, fmt.Sprint(v))
		}
	}
	e.Msg(msg)
}

// logSendFailed logs a delivery that failed (err, classified): at Warn,
// at most once per logRepeatEvery for each topic and kind of failure,
// with how many were left out; the others, and sends whose own context
// ended, at Debug. The caller has the error either way.
func (p *Producer) logSendFailed(err error, topic, session, eventID string) {
	kind, hint := failureKind(err)
	ev := p.cfg.Logger.Debug()
	suppressed := 0
	if kind != "" {
		var ok bool
		if ok, suppressed = p.sendLog.allow(topic+"\x00"+kind, time.Now()); ok {
			ev = p.cfg.Logger.Warn()
		}
	}
	if ev == nil {
		return
	}
	ev = ev.Err(err).Str("topic", topic).Str("session", session).Str("event_id", eventID)
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	ev.Msg("send failed: " + hint)
}

// failureKind names a classified delivery error's kind and what to do
// about it; "" for a send whose own context ended (the caller's choice).
func failureKind(err error) (kind, hint string) {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "", "the send's context ended first"
	case errors.Is(err, ErrUnknownTopic):
		return "unknown-topic", "the topic does not exist; create it (Ping names the missing topics)"
	case errors.Is(err, ErrTimeout):
		return "timeout", "not acknowledged within DeliveryTimeout; check that the brokers answer (Ping) and the topic's leaders are up"
	case errors.Is(err, ErrTooLarge):
		return "too-large", "the message is larger than the broker or topic accepts (max.message.bytes)"
	case errors.Is(err, ErrClosed):
		return "closed", "the producer was closed before the broker acknowledged it (CloseTimeout)"
	}
	return "other", "the broker refused it or could not be reached; the caller got the error"
}
