package consumer

import (
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// BreakerPolicy configures the circuit breaker (Config.Breaker): when most
// handler attempts fail across sessions — a dependency such as the
// database is down — every lane would otherwise retry on its own, spend its
// budget and fill the dead-letter topic with records that were never bad.
// The zero value is off; set Enabled (every other field then defaults).
//
// Once at least MinCalls attempts finished within Window and at least
// FailureRatio of them failed, the breaker opens: fetching pauses on every
// partition, lanes hold their current record and start no attempt, and one
// attempt at a time (a probe, on whatever record its lane holds) runs every
// ProbeInterval. A probe that succeeds closes the breaker and everything
// resumes. An attempt that fails while the breaker is open does not count
// against its record's retry budget, so nothing is dead-lettered as
// retries-exhausted meanwhile; a record whose lane waited for the breaker
// starts its budget by time (Retry.MaxElapsed) again. Permanent errors are
// the record's fault, not an outage: they are neither counted nor excused.
//
// A probe whose handler runs past HandlerTimeout plus its grace (the
// limit at which the watchdog reports a handler that ignores its context)
// is given up as hung: it counts as a failed probe, so the next probe runs
// on another lane ProbeInterval later. Its own lane still waits for the
// handler to return (order is never given up), and what the hung probe
// reports when it does return judges nothing: the breaker is not closed by
// it.
type BreakerPolicy struct {
	// Enabled turns the breaker on. Default: false (off).
	Enabled bool
	// Window is the period over which attempt outcomes are counted, in
	// ten buckets. Default: [DefaultBreakerWindow].
	Window time.Duration
	// FailureRatio, in (0, 1], opens the breaker once that share of the
	// attempts in the window failed. Default: [DefaultBreakerFailureRatio].
	FailureRatio float64
	// MinCalls is the fewest attempts in the window before the ratio is
	// judged. Default: [DefaultBreakerMinCalls].
	MinCalls int
	// ProbeInterval is the wait between probes while the breaker is open.
	// Default: [DefaultBreakerProbeInterval].
	ProbeInterval time.Duration
}

// Breaker defaults.
const (
	DefaultBreakerWindow        = 10 * time.Second
	DefaultBreakerFailureRatio  = 0.5
	DefaultBreakerMinCalls      = 20
	DefaultBreakerProbeInterval = time.Second
)

func (p BreakerPolicy) withDefaults() (BreakerPolicy, error) {
	bad := func(field string, v any) (BreakerPolicy, error) {
		return p, fmt.Errorf("%w: Breaker.%s: out of range: %v", ErrConfig, field, v)
	}
	switch {
	case p.Window < 0:
		return bad("Window", p.Window)
	case p.FailureRatio < 0 || p.FailureRatio > 1:
		return bad("FailureRatio (want 0..1)", p.FailureRatio)
	case p.MinCalls < 0:
		return bad("MinCalls", p.MinCalls)
	case p.ProbeInterval < 0:
		return bad("ProbeInterval", p.ProbeInterval)
	}
	orDefault(&p.Window, DefaultBreakerWindow)
	orDefault(&p.FailureRatio, DefaultBreakerFailureRatio)
	orDefault(&p.MinCalls, DefaultBreakerMinCalls)
	orDefault(&p.ProbeInterval, DefaultBreakerProbeInterval)
	return p, nil
}

// BreakerStats is the circuit breaker's state (Stats.Breaker).
type BreakerStats struct {
	// Enabled reports whether Config.Breaker is on.
	Enabled bool `json:"enabled"`
	// Open reports whether the breaker is open (fetching paused, lanes
	// holding their records) and OpenedAt since when.
	Open     bool      `json:"open"`
	OpenedAt time.Time `json:"opened_at"`
	// Calls and Failures are the attempts in the window that opened the
	// breaker while it is open, the attempts in the current window while
	// it is closed.
	Calls    int `json:"calls"`
	Failures int `json:"failures"`
	// Opens counts the times the breaker opened, Probes the probe attempts
	// and Excused the failed attempts not counted against their record's
	// retry budget because the breaker was open.
	Opens   int64 `json:"opens"`
	Probes  int64 `json:"probes"`
	Excused int64 `json:"excused"`
	// HungProbes counts the probes given up as hung: still running past
	// HandlerTimeout plus its grace, counted as failed so that another
	// lane probes (their own lanes wait for them to return).
	HungProbes int64 `json:"hung_probes"`
}

// machine is the policy as the breaker's state machine takes it
// (internal/breaker), defaults applied.
func (p BreakerPolicy) machine() breaker.Policy {
	return breaker.Policy{Window: p.Window, FailureRatio: p.FailureRatio, MinCalls: p.MinCalls, ProbeInterval: p.ProbeInterval}
}

// breakerStats is Stats.Breaker: b's state at now (nil: off).
func breakerStats(b *breaker.Breaker, now time.Time) BreakerStats {
	if b == nil {
		return BreakerStats{}
	}
	s := b.Snapshot(now)
	return BreakerStats{Enabled: true, Open: s.Open, OpenedAt: s.OpenedAt, Calls: s.Calls, Failures: s.Failures,
		Opens: s.Opens, Probes: s.Probes, Excused: s.Excused, HungProbes: s.HungProbes}
}
