package consumer

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logRepeatEvery is how often one repeated line (franz-go's, a group error)
// is logged at most; the next one logged says how many were suppressed.
const logRepeatEvery = 30 * time.Second

// logLimiter lets a line with a given key through at most once per
// logRepeatEvery.
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

// kgoLogger passes franz-go's warnings and errors to the lanes logger,
// each with source=franz-go (and the client's name). Its info and debug
// lines (one per request or heartbeat) are left out. A message repeated,
// as a failing dial is on every retry, is logged at most once per
// logRepeatEvery, with the number suppressed meanwhile.
type kgoLogger struct {
	log    *zerolog.Logger
	client string // "consumer", "dead-letter", "ping"
	limit  logLimiter
}

func newKgoLogger(log *zerolog.Logger, client string) *kgoLogger {
	return &kgoLogger{log: log, client: client}
}

// Level follows the lanes logger: warn, or error, or nothing when that is
// all it logs.
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
	if level != kgo.LogLevelWarn && level != kgo.LogLevelError || k.bookkeeping(msg) {
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
	e = e.Str("source", "franz-go").Str("client", k.client)
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
		case time.Duration:
			e = e.Stringer(key, v)
		default:
			e = e.Str(key, fmt.Sprint(v))
		}
	}
	e.Msg(msg)
}

// kgoBookkeeping are franz-go warnings about its own record of commits,
// which lanes does not use: lanes commits with CommitOffsetsSync, reads
// each answer itself (a refused commit is logged, counted and named by
// Health as lanes' own failure) and fences late work by assignment epoch.
//
// "received an OffsetCommitResponse after our group session has ended":
// franz-go has no record for the session yet, or no longer. Not yet: a
// fresh partition's start position is committed as soon as
// OnPartitionsAssigned has read it (with parking, while it goes on
// rebuilding parked sets), before franz-go's own offset fetch for the new
// session fills that record in; so on a healthy start, and after a rejoin
// that brings partitions with no commit. The commit itself succeeded
// (TestCommitBeforeGroupOffsetFetchQuiet). No longer: the session was
// lost while a commit was in flight; lanes logs the partitions lost, and
// the commit's refusal, itself.
var kgoBookkeeping = []string{
	"received an OffsetCommitResponse after our group session has ended",
}

// bookkeeping logs msg at Debug and reports true when it is one of
// kgoBookkeeping.
func (k *kgoLogger) bookkeeping(msg string) bool {
	for _, m := range kgoBookkeeping {
		if strings.HasPrefix(msg, m) {
			k.log.Debug().Str("source", "franz-go").Str("client", k.client).
				Msg(msg + " [franz-go's own record of commits, which lanes does not use: lanes read the commit's answer itself; harmless]")
			return true
		}
	}
	return false
}
