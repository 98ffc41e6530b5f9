package breaker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBreakerOpensAndProbes walks one outage: the breaker stays closed
// below MinCalls and below the ratio, opens at both, admits one probe per
// interval, ignores outcomes of attempts that are not probes, and closes on
// a probe's Success, waking the lanes waiting for it.
func TestBreakerOpensAndProbes(t *testing.T) {
	pol := Policy{Window: 10 * time.Second, MinCalls: 4, FailureRatio: 0.5, ProbeInterval: time.Second} // Window: the consumer's default
	b := New(pol, time.Minute, nil)
	now := time.Unix(1_700_000_000, 0)
	for i, o := range []Outcome{Failure, Success, Failure} {
		if tr, _ := b.Report(now, 0, o); tr != Stay {
			t.Fatalf("Outcome %d: %v below MinCalls", i, tr)
		}
	}
	if tr, _ := b.Report(now, 0, Failure); tr != BecameOpen {
		t.Fatalf("3 of 4 failed: %v, want opened", tr)
	}
	a := b.Allow(now)
	if a.OK || a.Wait != time.Second {
		t.Fatalf("allow right after opening: %+v", a)
	}
	ch := a.Closed
	if tr, _ := b.Report(now, 0, Success); tr != Stay {
		t.Fatalf("a Success that is not a probe closed it: %v", tr)
	}
	now = now.Add(time.Second)
	p1 := b.Allow(now)
	if p1.Probe == 0 || !p1.OK {
		t.Fatal("no probe after ProbeInterval")
	}
	if a := b.Allow(now); a.OK {
		t.Fatal("a second attempt admitted while the probe runs")
	}
	if tr, _ := b.Report(now, p1.Probe, Failure); tr != Stay {
		t.Fatalf("failed probe: %v", tr)
	}
	now = now.Add(time.Second)
	p2 := b.Allow(now)
	if tr, _ := b.Report(now, p2.Probe, Success); tr != BecameClosed {
		t.Fatalf("successful probe: %v, want closed", tr)
	}
	select {
	case <-ch:
	default:
		t.Fatal("waiters not woken on close")
	}
	if st := b.Snapshot(now); st.Open || st.Opens != 1 || st.Probes != 2 || st.Calls != 0 || st.HungProbes != 0 {
		t.Fatalf("stats after close: %+v", st)
	}
}

// TestBreakerProbeGivenUpAsHung walks a hung probe: it holds the probe
// until its limit, is then given up (counted as a failed probe, named
// once), the next probe starts ProbeInterval later on another lane, and
// the hung probe's late Success neither closes the breaker nor frees the
// probe that replaced it; a probe that returns only past its limit is
// given up by its own report; after the breaker closed and opened again,
// an old probe's report judges nothing.
func TestBreakerProbeGivenUpAsHung(t *testing.T) {
	const limit, interval = 10 * time.Second, time.Second
	b := New(Policy{Window: time.Minute, FailureRatio: 0.5, MinCalls: 1, ProbeInterval: interval}, limit, nil)
	now := time.Unix(1_700_000_000, 0)
	if tr, _ := b.Report(now, 0, Failure); tr != BecameOpen {
		t.Fatal("not opened")
	}
	now = now.Add(interval)
	p1 := b.Allow(now)
	if p1.Probe == 0 {
		t.Fatal("no probe")
	}
	started := now
	if a := b.Allow(started.Add(limit - 1)); a.OK || a.Hung != 0 || a.Wait != interval {
		t.Fatalf("just before its limit: %+v", a)
	}
	if idle, hung := b.Idle(started.Add(limit - 1)); idle || hung != 0 {
		t.Fatalf("idle just before the limit: %v, hung %d", idle, hung)
	}
	if st := b.Snapshot(started.Add(limit)); st.HungProbes != 1 {
		t.Fatalf("Stats at the limit: HungProbes %d, want 1", st.HungProbes)
	}
	a := b.Allow(started.Add(limit))
	if a.OK || a.Hung != p1.Probe || a.Wait != interval {
		t.Fatalf("at the limit: %+v, want refused with the hung probe %d named, wait %v", a, p1.Probe, interval)
	}
	if a := b.Allow(started.Add(limit + interval/2)); a.OK || a.Hung != 0 || a.Wait != interval/2 {
		t.Fatalf("half an interval later: %+v (a probe is named once)", a)
	}
	now = started.Add(limit + interval)
	p2 := b.Allow(now)
	if !p2.OK || p2.Probe == 0 || p2.Probe == p1.Probe {
		t.Fatalf("ProbeInterval after the hung probe: %+v, want a new probe", p2)
	}
	if tr, hung := b.Report(now, p1.Probe, Success); tr != Stay || hung != 0 {
		t.Fatalf("the hung probe's late Success: %v (hung %d), want ignored", tr, hung)
	}
	if a := b.Allow(now); a.OK {
		t.Fatal("the hung probe's late report freed the running probe's place")
	}
	// p2 returns only past its own limit: its report gives it up.
	now = now.Add(limit)
	if tr, hung := b.Report(now, p2.Probe, Success); tr != Stay || hung != p2.Probe {
		t.Fatalf("a probe reporting past its limit: %v (hung %d), want stay, given up", tr, hung)
	}
	if a := b.Allow(now); a.OK || a.Wait != interval {
		t.Fatalf("after the late probe: %+v, want the next probe ProbeInterval after its limit", a)
	}
	now = now.Add(interval)
	p3 := b.Allow(now)
	if tr, _ := b.Report(now, p3.Probe, Success); tr != BecameClosed {
		t.Fatalf("p3's Success: %v, want closed", tr)
	}
	if tr, _ := b.Report(now, 0, Failure); tr != BecameOpen {
		t.Fatal("not opened again")
	}
	if tr, _ := b.Report(now, p1.Probe, Success); tr != Stay {
		t.Fatalf("a probe of the last opening judged this one: %v", tr)
	}
	if st := b.Snapshot(now); !st.Open || st.Probes != 3 || st.HungProbes != 2 {
		t.Fatalf("stats: %+v, want open, 3 probes, 2 hung", st)
	}
}

// refBreaker is the breaker's specification, written plainly: every
// Outcome of the closed state kept in a list, the window counted from it,
// and every probe kept with its start and its report, so that whether a
// probe runs, whether it hung and when the next may start are read off
// that history at any time instead of being kept up to date.
type refBreaker struct {
	pol    Policy
	limit  time.Duration // a probe running this long is given up as hung
	open   bool
	next   time.Time // next probe time set by the opening or a judging report
	events []refEvent
	probes []refProbe // every probe so far; probe id i+1 is probes[i]
}

type refEvent struct {
	at   time.Time
	fail bool
}

type refProbe struct {
	start    time.Time
	reported bool
	at       time.Time // when it reported
	noticed  bool      // a call already named it as given up
}

// hung: the probe reached its limit before reporting.
func (r *refBreaker) hung(p refProbe, now time.Time) bool {
	end := now
	if p.reported {
		end = p.at
	}
	return !end.Before(p.start.Add(r.limit))
}

// running is the probe that runs at now: the last one, not reported and
// not hung; 0 when none.
func (r *refBreaker) running(now time.Time) ProbeID {
	if n := len(r.probes); n > 0 && !r.probes[n-1].reported && !r.hung(r.probes[n-1], now) {
		return ProbeID(n)
	}
	return 0
}

// due is when the next probe may start, no probe running: ProbeInterval
// after the last probe hung (a hung probe is a failed one), else as the
// opening or the last judging report set it.
func (r *refBreaker) due(now time.Time) time.Time {
	if n := len(r.probes); n > 0 && r.hung(r.probes[n-1], now) {
		return r.probes[n-1].start.Add(r.limit + r.pol.ProbeInterval)
	}
	return r.next
}

// notice returns the probe given up as hung that no call named yet.
func (r *refBreaker) notice(now time.Time) ProbeID {
	if n := len(r.probes); n > 0 && !r.probes[n-1].noticed && r.hung(r.probes[n-1], now) {
		r.probes[n-1].noticed = true
		return ProbeID(n)
	}
	return 0
}

func (r *refBreaker) hungCount(now time.Time) (n int64) {
	for _, p := range r.probes {
		if r.hung(p, now) {
			n++
		}
	}
	return n
}

func (r *refBreaker) slot(t time.Time) int64 {
	return t.UnixNano() / int64(r.pol.Window/breakerBuckets)
}

func (r *refBreaker) window(now time.Time) (calls, fails int) {
	cur := r.slot(now)
	for _, e := range r.events {
		if s := r.slot(e.at); s > cur-breakerBuckets && s <= cur {
			calls++
			if e.fail {
				fails++
			}
		}
	}
	return calls, fails
}

func (r *refBreaker) allow(now time.Time) (probe ProbeID, ok bool, wait time.Duration, hung ProbeID) {
	if !r.open {
		return 0, true, 0, 0
	}
	hung = r.notice(now)
	if r.running(now) != 0 {
		return 0, false, r.pol.ProbeInterval, hung
	}
	if due := r.due(now); now.Before(due) {
		return 0, false, due.Sub(now), hung
	}
	r.probes = append(r.probes, refProbe{start: now})
	return ProbeID(len(r.probes)), true, 0, hung
}

func (r *refBreaker) report(now time.Time, probe ProbeID, o Outcome) (Transition, ProbeID) {
	judges := probe != 0 && probe == r.running(now)
	if probe != 0 {
		r.probes[probe-1].reported, r.probes[probe-1].at = true, now
	}
	hung := r.notice(now)
	if r.open {
		if !judges {
			return Stay, hung
		}
		switch o {
		case Success:
			r.open, r.events = false, nil
			return BecameClosed, hung
		case Failure:
			r.next = now.Add(r.pol.ProbeInterval)
		default:
			r.next = now
		}
		return Stay, hung
	}
	if o == Neutral {
		return Stay, hung
	}
	r.events = append(r.events, refEvent{now, o == Failure})
	calls, fails := r.window(now)
	if o == Failure && calls >= r.pol.MinCalls && float64(fails) >= r.pol.FailureRatio*float64(calls) {
		r.open, r.next, r.events = true, now.Add(r.pol.ProbeInterval), nil
		return BecameOpen, hung
	}
	return Stay, hung
}

func (r *refBreaker) idle(now time.Time, waiters int64) (bool, ProbeID) {
	if !r.open {
		return false, 0
	}
	hung := r.notice(now)
	return r.running(now) == 0 && waiters == 0 && !now.Before(r.due(now)), hung
}

// TestBreakerModel drives the breaker and its reference with the same
// random attempts (started by random lanes, ending in random outcomes), a
// random clock and the watchdog's idle check, and compares every answer and
// the state after each step. Some attempts hang: they report much later or
// never, so probes are given up as hung (by a lane asking, the watchdog or
// their own late report), their late reports must judge nothing, and the
// reference says when the next probe may start.
func TestBreakerModel(t *testing.T) {
	seeds := longtest.Size(t, uint64(200), 20)
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		pol := Policy{
			Window:        time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond,
			FailureRatio:  []float64{0.1, 0.5, 0.8, 1}[rng.IntN(4)],
			MinCalls:      1 + rng.IntN(30),
			ProbeInterval: time.Duration(1+rng.IntN(50)) * 10 * time.Millisecond,
		}
		limit := time.Duration(1+rng.IntN(40)) * 10 * time.Millisecond
		failP := rng.Float64()     // this run's share of failures
		hangP := rng.Float64() / 2 // this run's share of attempts that hang
		b, ref := New(pol, limit, nil), &refBreaker{pol: pol, limit: limit}
		now := time.Unix(1_700_000_000, 0)
		type attempt struct {
			probe ProbeID
			hangs bool
		}
		var running []attempt
		var opens, hungSeen int64
		for step := 0; step < 3000; step++ {
			at := func(what string) string { return fmt.Sprintf("seed %d step %d: %s", seed, step, what) }
			switch op := rng.IntN(12); {
			case op < 4: // a lane asks to start an attempt
				a := b.Allow(now)
				wp, wok, wwait, whung := ref.allow(now)
				if a.Probe != wp || a.OK != wok || a.Hung != whung {
					t.Fatalf("%s: allow = (probe %d, ok %v, hung %d), want (%d, %v, %d)", at("allow"), a.Probe, a.OK, a.Hung, wp, wok, whung)
				}
				if !a.OK && (a.Wait != wwait || a.Closed == nil) {
					t.Fatalf("%s: refused with wait %v (want %v: when the next probe may start), channel %v",
						at("allow"), a.Wait, wwait, a.Closed)
				}
				if !a.OK && (a.Wait <= 0 || a.Wait > pol.ProbeInterval) {
					t.Fatalf("%s: wait %v outside (0, ProbeInterval]", at("allow"), a.Wait)
				}
				hungSeen += int64(boolN(a.Hung != 0))
				if a.OK {
					running = append(running, attempt{a.Probe, rng.Float64() < hangP})
				}
			case op < 8 && len(running) > 0: // an attempt ends; a hung one rarely (late)
				i := rng.IntN(len(running))
				a := running[i]
				if a.hangs && rng.IntN(10) > 0 {
					break
				}
				running = slices.Delete(running, i, i+1)
				o := Success
				if r := rng.Float64(); r < 0.05 {
					o = Neutral
				} else if r < failP {
					o = Failure
				}
				got, ghung := b.Report(now, a.probe, o)
				want, whung := ref.report(now, a.probe, o)
				if got != want || ghung != whung {
					t.Fatalf("%s: report(probe %d, %v) = (%v, hung %d), want (%v, %d)", at("report"), a.probe, o, got, ghung, want, whung)
				}
				hungSeen += int64(boolN(ghung != 0))
				opens += int64(boolN(got == BecameOpen))
			case op < 9: // the watchdog's tick
				w := int64(rng.IntN(2))
				b.waiters.Store(w)
				gidle, ghung := b.Idle(now)
				widle, whung := ref.idle(now, w)
				if gidle != widle || ghung != whung {
					t.Fatalf("%s: idle(waiters %d) = (%v, hung %d), want (%v, %d)", at("idle"), w, gidle, ghung, widle, whung)
				}
				hungSeen += int64(boolN(ghung != 0))
			default: // time passes: within a bucket, or across windows
				now = now.Add(time.Duration(rng.Int64N(int64(pol.Window) / 3)))
			}
			st := b.Snapshot(now)
			if st.Open != ref.open || b.OpenNow() != ref.open {
				t.Fatalf("%s: open %v (flag %v), want %v", at("state"), st.Open, b.OpenNow(), ref.open)
			}
			if st.Probes != int64(len(ref.probes)) || st.HungProbes != ref.hungCount(now) {
				t.Fatalf("%s: probes %d hung %d, want %d %d", at("state"), st.Probes, st.HungProbes, len(ref.probes), ref.hungCount(now))
			}
			if !ref.open {
				if c, f := ref.window(now); st.Calls != c || st.Failures != f {
					t.Fatalf("%s: window %d/%d, want %d/%d", at("state"), st.Failures, st.Calls, f, c)
				}
			}
		}
		st := b.Snapshot(now)
		if st.Opens != opens {
			t.Fatalf("seed %d: Opens %d, counted %d", seed, st.Opens, opens)
		}
		// Every probe given up was named once, by the call that gave it up
		// (one still past its limit unnoticed is counted, not yet named).
		if unnamed := st.HungProbes - hungSeen; unnamed < 0 || unnamed > 1 {
			t.Fatalf("seed %d: %d probes given up as hung, %d named", seed, st.HungProbes, hungSeen)
		}
	}
}
