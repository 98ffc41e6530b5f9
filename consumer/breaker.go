package consumer

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
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

// outcome is what one attempt says about the dependency.
type outcome int

const (
	success outcome = iota
	failure
	neutral // a permanent error or a shutdown: says nothing about an outage
)

// transition is a change of the breaker's state.
type transition int

const (
	stay transition = iota
	becameOpen
	becameClosed
)

const breakerBuckets = 10

// probeID names one probe: the breaker's count of probes when it started
// (so the first is 1). Zero is an attempt that is not a probe. A probe's
// report judges the open breaker only while its id is the running one, so
// the late report of a probe given up as hung never judges for the probe
// that replaced it, nor for a later opening.
type probeID uint64

// admission is allow's answer: ok to start an attempt (as the probe when
// probe is set), or not, with the longest useful wait and a channel closed
// when the breaker closes. hung names a probe this call gave up as hung.
type admission struct {
	ok     bool
	probe  probeID
	wait   time.Duration
	closed <-chan struct{}
	hung   probeID
}

type bucket struct {
	period       int64 // time / width, the period this bucket counts
	calls, fails int
}

// breaker is the circuit breaker's state machine: closed ⇄ open, a probe
// at a time while open. It owns every field under mu; the consumer calls
// allow before an attempt and report after it, and acts on the transitions
// report returns (flow, log). Time is passed in, so tests drive it.
//
// A probe still running hungAfter after it started is given up as hung
// (expireLocked) by the first allow, report or idle at or past that time:
// time alone decides, so the state after any sequence of calls is the same
// whether or not someone asked in between.
type breaker struct {
	pol       BreakerPolicy
	width     time.Duration
	hungAfter time.Duration // a probe running this long is given up as hung
	open      atomic.Bool   // mirrors isOpen for lanes' fast path
	// idleReleased: while open, fetching was let resume because nothing
	// was left to probe with (breakerIdle); a lane that waits clears it.
	idleReleased atomic.Bool
	// waiters counts lanes holding a record until the breaker lets them
	// attempt: the records a probe can be made with.
	waiters atomic.Int64
	// probeWork is the running probe's record as the lanes know it, kept
	// by the gate (breaker_gate.go) to name a probe given up as hung; the
	// state machine never reads it.
	probeWork atomic.Pointer[probeRec]
	// heldTime is told, under mu, when the breaker opens and closes, for
	// the stall watch (stall_clock.go); nil: not told.
	heldTime *holdClock

	mu         sync.Mutex
	isOpen     bool
	probe      probeID   // the running probe; 0: none runs
	probeStart time.Time // when it started
	openedAt   time.Time
	nextProbe  time.Time
	closedCh   chan struct{} // closed when the breaker closes; new at each open
	buckets    [breakerBuckets]bucket
	atOpen     [2]int // calls, failures of the window that opened it
	opens      int64
	probes     int64 // also the last probeID handed out
	hung       int64
	excused    atomic.Int64
}

// newBreaker makes a closed breaker; a probe running hungAfter is given
// up as hung (the consumer passes HandlerTimeout plus slowGrace).
func newBreaker(pol BreakerPolicy, hungAfter time.Duration) *breaker {
	return &breaker{pol: pol, width: max(pol.Window/breakerBuckets, 1), hungAfter: hungAfter,
		closedCh: make(chan struct{})}
}

// expireLocked gives the running probe up as hung when it has run for
// hungAfter at now, and returns its id (0 when none was given up). A hung
// probe counts as a failed one: the next probe is due ProbeInterval after
// the moment it was given up (its start plus hungAfter), whoever notices.
func (b *breaker) expireLocked(now time.Time) probeID {
	if b.probe == 0 {
		return 0
	}
	limit := b.probeStart.Add(b.hungAfter)
	if now.Before(limit) {
		return 0
	}
	id := b.probe
	b.probe = 0
	b.hung++
	b.nextProbe = limit.Add(b.pol.ProbeInterval)
	return id
}

// allow asks to start an attempt at now. Closed: ok. Open: ok as the
// probe when no probe runs (or the running one is given up as hung at now)
// and ProbeInterval passed since the last one; otherwise not ok, with the
// longest useful wait and a channel closed when the breaker closes.
func (b *breaker) allow(now time.Time) admission {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.isOpen {
		return admission{ok: true}
	}
	a := admission{hung: b.expireLocked(now)}
	if b.probe == 0 && !now.Before(b.nextProbe) {
		b.probes++
		b.probe, b.probeStart = probeID(b.probes), now
		a.ok, a.probe = true, b.probe
		return a
	}
	a.wait, a.closed = b.pol.ProbeInterval, b.closedCh
	if b.probe == 0 {
		a.wait = b.nextProbe.Sub(now)
	}
	return a
}

// report records an attempt's outcome at now; probe is the id allow gave
// it (0: not a probe). It returns the transition it caused, and the probe
// it gave up as hung, if any (possibly the reporting one: a probe that
// returns only past its limit is hung all the same).
//
// Only the running probe judges an open breaker. The report of a probe
// given up as hung is an ordinary attempt's: ignored while open (a failure
// is excused), counted in the window while closed. A late success does not
// close the breaker: the probe that replaced it runs now and its verdict is
// the fresher one; a success that took longer than HandlerTimeout says the
// dependency is at best too slow to serve every lane at once; and letting
// two probes judge would make the breaker's state depend on which of them
// returns last. The next probe closes it soon enough if the dependency is
// back.
func (b *breaker) report(now time.Time, probe probeID, o outcome) (transition, probeID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hung := b.expireLocked(now)
	current := probe != 0 && probe == b.probe
	if current {
		b.probe = 0
	}
	if b.isOpen {
		if !current {
			return stay, hung // only the running probe judges an open breaker
		}
		switch o {
		case success:
			b.isOpen = false
			b.open.Store(false)
			b.clearWindow()
			close(b.closedCh)
			b.heldTime.set(holdBreaker, false, now)
			return becameClosed, hung
		case failure:
			b.nextProbe = now.Add(b.pol.ProbeInterval)
		default:
			b.nextProbe = now // no verdict: the next lane probes at once
		}
		return stay, hung
	}
	if o == neutral {
		return stay, hung
	}
	period := now.UnixNano() / int64(b.width)
	k := &b.buckets[uint64(period)%breakerBuckets]
	if k.period != period {
		*k = bucket{period: period}
	}
	k.calls++
	if o == failure {
		k.fails++
	}
	calls, fails := b.windowLocked(period)
	if o != failure || calls < b.pol.MinCalls || float64(fails) < b.pol.FailureRatio*float64(calls) {
		return stay, hung
	}
	b.isOpen = true
	b.idleReleased.Store(false)
	b.open.Store(true)
	b.openedAt, b.nextProbe = now, now.Add(b.pol.ProbeInterval)
	b.atOpen = [2]int{calls, fails}
	b.opens++
	b.closedCh = make(chan struct{})
	b.clearWindow()
	b.heldTime.set(holdBreaker, true, now)
	return becameOpen, hung
}

// windowLocked sums the buckets of the window ending in period.
func (b *breaker) windowLocked(period int64) (calls, fails int) {
	for _, k := range b.buckets {
		if k.period > period-breakerBuckets && k.period <= period {
			calls += k.calls
			fails += k.fails
		}
	}
	return calls, fails
}

func (b *breaker) clearWindow() { b.buckets = [breakerBuckets]bucket{} }

// snapshot is the breaker's part of Stats at now.
func (b *breaker) snapshot(now time.Time) BreakerStats {
	if b == nil {
		return BreakerStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BreakerStats{Enabled: true, Open: b.isOpen, Opens: b.opens, Probes: b.probes, Excused: b.excused.Load(),
		HungProbes: b.hung}
	if b.probe != 0 && !now.Before(b.probeStart.Add(b.hungAfter)) {
		st.HungProbes++ // past its limit, given up at the next allow, report or watchdog tick
	}
	if b.isOpen {
		st.OpenedAt = b.openedAt
		st.Calls, st.Failures = b.atOpen[0], b.atOpen[1]
	} else {
		st.Calls, st.Failures = b.windowLocked(now.UnixNano() / int64(b.width))
	}
	return st
}

// idle reports whether the breaker is open with no record to probe with
// at a time a probe is due: no lane holds one, none runs (a probe given up
// as hung at now does not count: its lane waits for its handler). hung
// names the probe this call gave up, if any.
func (b *breaker) idle(now time.Time) (idle bool, hung probeID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.isOpen {
		return false, 0
	}
	hung = b.expireLocked(now)
	return b.probe == 0 && b.waiters.Load() == 0 && !now.Before(b.nextProbe), hung
}

// lastOpened is when the breaker last opened.
func (b *breaker) lastOpened() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt
}

// wantsHold reports whether fetching should be held: open, and not
// released for want of a record to probe with. The flow controller
// derives the hold from it at each apply, so no caller's hold can
// outlive the state it was decided on.
func (b *breaker) wantsHold() bool {
	return b != nil && b.open.Load() && !b.idleReleased.Load()
}

// openNow reports whether the breaker is open; false for a nil breaker.
func (b *breaker) openNow() bool { return b != nil && b.open.Load() }
