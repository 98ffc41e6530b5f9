package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// Policy is what the breaker judges by (the consumer's BreakerPolicy,
// defaults applied).
type Policy struct {
	Window        time.Duration // counted in ten buckets
	FailureRatio  float64       // in (0, 1]
	MinCalls      int           // fewest attempts in the window before the ratio is judged
	ProbeInterval time.Duration // between probes while open
}

// Stats is the breaker's state (the consumer's BreakerStats without
// Enabled): see its fields.
type Stats struct {
	Open       bool
	OpenedAt   time.Time
	Calls      int
	Failures   int
	Opens      int64
	Probes     int64
	Excused    int64
	HungProbes int64
}

// Policy returns the policy the breaker judges by.
func (b *Breaker) Policy() Policy { return b.pol }

// HungAfter is how long a probe runs before it is given up as hung.
func (b *Breaker) HungAfter() time.Duration { return b.hungAfter }

// Excuse counts a failed attempt not held against its record's retry
// budget because the breaker was open.
func (b *Breaker) Excuse() { b.excused.Add(1) }

// BeginWait counts a lane that holds a record until the breaker lets it
// attempt (a record a probe can be made with), and reports whether
// fetching had been let resume for want of one (Idle): the caller then
// re-applies the fetch hold. EndWait undoes the count.
func (b *Breaker) BeginWait() (holdAgain bool) {
	b.waiters.Add(1)
	return b.idleReleased.Swap(false)
}

// EndWait ends a BeginWait.
func (b *Breaker) EndWait() { b.waiters.Add(-1) }

// Waiters is how many lanes wait for the breaker (BeginWait).
func (b *Breaker) Waiters() int64 { return b.waiters.Load() }

// ReleaseIdle lets fetching resume while the breaker is open with nothing
// to probe with (Idle said so): WantsHold reports false until a lane
// waits again.
func (b *Breaker) ReleaseIdle() { b.idleReleased.Store(true) }

// Outcome is what one attempt says about the dependency.
type Outcome int

const (
	Success Outcome = iota
	Failure
	Neutral // a permanent error or a shutdown: says nothing about an outage
)

// Transition is a change of the breaker's state.
type Transition int

const (
	Stay Transition = iota
	BecameOpen
	BecameClosed
)

const breakerBuckets = 10

// ProbeID names one probe: the breaker's count of probes when it started
// (so the first is 1). Zero is an attempt that is not a probe. A probe's
// report judges the open breaker only while its id is the running one, so
// the late report of a probe given up as hung never judges for the probe
// that replaced it, nor for a later opening.
type ProbeID uint64

// Admission is allow's answer: ok to start an attempt (as the probe when
// probe is set), or not, with the longest useful wait and a channel closed
// when the breaker closes. hung names a probe this call gave up as hung.
type Admission struct {
	OK     bool
	Probe  ProbeID
	Wait   time.Duration
	Closed <-chan struct{}
	Hung   ProbeID
}

type bucket struct {
	period       int64 // time / width, the period this bucket counts
	calls, fails int
}

// Breaker is the circuit breaker's state machine: closed ⇄ open, a probe
// at a time while open. It owns every field under mu; the consumer calls
// Allow before an attempt and Report after it, and acts on the transitions
// report returns (flow, log). Time is passed in, so tests drive it.
//
// A probe still running hungAfter after it started is given up as hung
// (expireLocked) by the first allow, report or idle at or past that time:
// time alone decides, so the state after any sequence of calls is the same
// whether or not someone asked in between.
type Breaker struct {
	pol       Policy
	width     time.Duration
	hungAfter time.Duration // a probe running this long is given up as hung
	open      atomic.Bool   // mirrors isOpen for lanes' fast path
	// idleReleased: while open, fetching was let resume because nothing
	// was left to probe with (breakerIdle); a lane that waits clears it.
	idleReleased atomic.Bool
	// waiters counts lanes holding a record until the breaker lets them
	// attempt: the records a probe can be made with.
	waiters atomic.Int64
	// onHold is told, under mu, when the breaker opens and closes (the
	// consumer's stall watch: a hold is not a stall); nil: not told.
	onHold func(open bool, now time.Time)

	mu         sync.Mutex
	isOpen     bool
	probe      ProbeID   // the running probe; 0: none runs
	probeStart time.Time // when it started
	openedAt   time.Time
	nextProbe  time.Time
	closedCh   chan struct{} // closed when the breaker closes; new at each open
	buckets    [breakerBuckets]bucket
	atOpen     [2]int // calls, failures of the window that opened it
	opens      int64
	probes     int64 // also the last ProbeID handed out
	hung       int64
	excused    atomic.Int64
}

// New makes a closed breaker; a probe running hungAfter is given up as
// hung (the consumer passes HandlerTimeout plus its grace). onHold, if
// not nil, is told under the breaker's lock when it opens and closes.
func New(pol Policy, hungAfter time.Duration, onHold func(open bool, now time.Time)) *Breaker {
	return &Breaker{pol: pol, width: max(pol.Window/breakerBuckets, 1), hungAfter: hungAfter,
		closedCh: make(chan struct{}), onHold: onHold}
}

func (b *Breaker) tellHold(open bool, now time.Time) {
	if b.onHold != nil {
		b.onHold(open, now)
	}
}

// expireLocked gives the running probe up as hung when it has run for
// hungAfter at now, and returns its id (0 when none was given up). A hung
// probe counts as a failed one: the next probe is due ProbeInterval after
// the moment it was given up (its start plus hungAfter), whoever notices.
func (b *Breaker) expireLocked(now time.Time) ProbeID {
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

// Allow asks to start an attempt at now. Closed: ok. Open: ok as the
// probe when no probe runs (or the running one is given up as hung at now)
// and ProbeInterval passed since the last one; otherwise not ok, with the
// longest useful wait and a channel closed when the breaker closes.
func (b *Breaker) Allow(now time.Time) Admission {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.isOpen {
		return Admission{OK: true}
	}
	a := Admission{Hung: b.expireLocked(now)}
	if b.probe == 0 && !now.Before(b.nextProbe) {
		b.probes++
		b.probe, b.probeStart = ProbeID(b.probes), now
		a.OK, a.Probe = true, b.probe
		return a
	}
	a.Wait, a.Closed = b.pol.ProbeInterval, b.closedCh
	if b.probe == 0 {
		a.Wait = b.nextProbe.Sub(now)
	}
	return a
}

// Report records an attempt's outcome at now; probe is the id Allow gave
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
func (b *Breaker) Report(now time.Time, probe ProbeID, o Outcome) (Transition, ProbeID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hung := b.expireLocked(now)
	current := probe != 0 && probe == b.probe
	if current {
		b.probe = 0
	}
	if b.isOpen {
		if !current {
			return Stay, hung // only the running probe judges an open breaker
		}
		switch o {
		case Success:
			b.isOpen = false
			b.open.Store(false)
			b.clearWindow()
			close(b.closedCh)
			b.tellHold(false, now)
			return BecameClosed, hung
		case Failure:
			b.nextProbe = now.Add(b.pol.ProbeInterval)
		default:
			b.nextProbe = now // no verdict: the next lane probes at once
		}
		return Stay, hung
	}
	if o == Neutral {
		return Stay, hung
	}
	period := now.UnixNano() / int64(b.width)
	k := &b.buckets[uint64(period)%breakerBuckets]
	if k.period != period {
		*k = bucket{period: period}
	}
	k.calls++
	if o == Failure {
		k.fails++
	}
	calls, fails := b.windowLocked(period)
	if o != Failure || calls < b.pol.MinCalls || float64(fails) < b.pol.FailureRatio*float64(calls) {
		return Stay, hung
	}
	b.isOpen = true
	b.idleReleased.Store(false)
	b.open.Store(true)
	b.openedAt, b.nextProbe = now, now.Add(b.pol.ProbeInterval)
	b.atOpen = [2]int{calls, fails}
	b.opens++
	b.closedCh = make(chan struct{})
	b.clearWindow()
	b.tellHold(true, now)
	return BecameOpen, hung
}

// windowLocked sums the buckets of the window ending in period.
func (b *Breaker) windowLocked(period int64) (calls, fails int) {
	for _, k := range b.buckets {
		if k.period > period-breakerBuckets && k.period <= period {
			calls += k.calls
			fails += k.fails
		}
	}
	return calls, fails
}

func (b *Breaker) clearWindow() { b.buckets = [breakerBuckets]bucket{} }

// Snapshot is the breaker's state at now; the zero Stats for a nil
// breaker (off).
func (b *Breaker) Snapshot(now time.Time) Stats {
	if b == nil {
		return Stats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Stats{Open: b.isOpen, Opens: b.opens, Probes: b.probes, Excused: b.excused.Load(),
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

// Idle reports whether the breaker is open with no record to probe with
// at a time a probe is due: no lane holds one, none runs (a probe given up
// as hung at now does not count: its lane waits for its handler). hung
// names the probe this call gave up, if any.
func (b *Breaker) Idle(now time.Time) (idle bool, hung ProbeID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.isOpen {
		return false, 0
	}
	hung = b.expireLocked(now)
	return b.probe == 0 && b.waiters.Load() == 0 && !now.Before(b.nextProbe), hung
}

// LastOpened is when the breaker last opened.
func (b *Breaker) LastOpened() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt
}

// WantsHold reports whether fetching should be held: open, and not
// released for want of a record to probe with. The flow controller
// derives the hold from it at each apply, so no caller's hold can
// outlive the state it was decided on.
func (b *Breaker) WantsHold() bool {
	return b != nil && b.open.Load() && !b.idleReleased.Load()
}

// OpenNow reports whether the breaker is open; false for a nil breaker.
func (b *Breaker) OpenNow() bool { return b != nil && b.open.Load() }
