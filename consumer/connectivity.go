package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerWatch follows, through the consumer client's hooks, whether any
// broker answers. A failed dial (the connection refused, TLS or SASL
// failing) starts an outage; any answer ends it: a dial that got through
// or a response read from any broker. It warns when an outage starts, again
// at most every logRepeatEvery while it lasts (never once per retry), and
// says so at info when a broker answers again after a warning.
type brokerWatch struct {
	seeds []string
	log   *zerolog.Logger

	down    atomic.Bool // an outage is under way
	reached atomic.Bool // a broker answered since Run started

	mu       sync.Mutex
	since    time.Time // the outage's first failed dial; zero while brokers answer
	failed   []string  // brokers (host:port) whose dials failed in the outage
	lastErr  error     // the outage's latest dial error; kept after it for Run's error
	warnedAt time.Time // the outage's latest warning; zero: not warned
	lastWarn time.Time // the latest warning of any outage, for the rate limit
}

var (
	_ kgo.HookBrokerConnect = (*brokerWatch)(nil)
	_ kgo.HookBrokerE2E     = (*brokerWatch)(nil)
)

func newBrokerWatch(seeds []string, log *zerolog.Logger) *brokerWatch {
	return &brokerWatch{seeds: seeds, log: log}
}

// OnBrokerConnect sees every dial, its error included. A dial cut short
// by the client closing (Run ending) says nothing about the brokers.
func (w *brokerWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
		return
	}
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if err != nil {
		w.dialFailed(addr, err, time.Now())
		return
	}
	w.answered(addr, time.Now())
}

// OnBrokerE2E sees every response read: one read without error ends an
// outage.
func (w *brokerWatch) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil || (!w.down.Load() && w.reached.Load()) {
		return
	}
	w.answered(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), time.Now())
}

func (w *brokerWatch) dialFailed(addr string, err error, now time.Time) {
	w.mu.Lock()
	if w.since.IsZero() {
		w.since, w.failed, w.warnedAt = now, nil, time.Time{}
		w.down.Store(true)
	}
	if !slices.Contains(w.failed, addr) {
		w.failed = append(w.failed, addr)
	}
	w.lastErr = err
	warn := now.Sub(w.lastWarn) >= logRepeatEvery
	since, failed := w.since, slices.Clone(w.failed)
	if warn {
		w.warnedAt, w.lastWarn = now, now
	}
	w.mu.Unlock()
	if warn {
		e := w.log.Warn().Err(err).Strs("brokers", failed).Strs("seed_brokers", w.seeds).Time("since", since)
		if d := now.Sub(since); d > 0 {
			e = e.Stringer("for", d.Round(time.Millisecond))
		}
		e.Msg("cannot reach brokers: no broker answered since then; check Config.Brokers, the network and the brokers (retrying)")
	}
}

func (w *brokerWatch) answered(addr string, now time.Time) {
	w.reached.Store(true)
	w.mu.Lock()
	if w.since.IsZero() {
		w.mu.Unlock()
		return
	}
	since, warned := w.since, !w.warnedAt.IsZero()
	w.since, w.failed, w.warnedAt = time.Time{}, nil, time.Time{}
	w.down.Store(false)
	w.mu.Unlock()
	if warned {
		w.log.Info().Str("broker", addr).Stringer("after", now.Sub(since).Round(time.Millisecond)).
			Msg("reached brokers again")
	}
}

// reason is the readiness reason while no broker answers, or "".
func (w *brokerWatch) reason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return ""
	}
	return fmt.Sprintf("cannot reach brokers %v since %s: %v", w.failed, w.since.UTC().Format(time.RFC3339), w.lastErr)
}

// neverReached returns, when dials failed and no broker ever answered, an
// error wrapping ErrUnreachable naming the brokers and the last error;
// nil otherwise.
func (w *brokerWatch) neverReached() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reached.Load() || w.lastErr == nil {
		return nil
	}
	return fmt.Errorf("%w: no broker of %v answered since %s: %w",
		ErrUnreachable, w.seeds, w.since.UTC().Format(time.RFC3339), w.lastErr)
}
