package consumer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// refBreaker is the breaker's specification, written plainly: every
// outcome of the closed state kept in a list, the window counted from it,
// and every probe kept with its start and its report, so that whether a
// probe runs, whether it hung and when the next may start are read off
// that history at any time instead of being kept up to date.
type refBreaker struct {
	pol    BreakerPolicy
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
func (r *refBreaker) running(now time.Time) probeID {
	if n := len(r.probes); n > 0 && !r.probes[n-1].reported && !r.hung(r.probes[n-1], now) {
		return probeID(n)
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
func (r *refBreaker) notice(now time.Time) probeID {
	if n := len(r.probes); n > 0 && !r.probes[n-1].noticed && r.hung(r.probes[n-1], now) {
		r.probes[n-1].noticed = true
		return probeID(n)
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

func (r *refBreaker) allow(now time.Time) (probe probeID, ok bool, wait time.Duration, hung probeID) {
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
	return probeID(len(r.probes)), true, 0, hung
}

func (r *refBreaker) report(now time.Time, probe probeID, o outcome) (transition, probeID) {
	judges := probe != 0 && probe == r.running(now)
	if probe != 0 {
		r.probes[probe-1].reported, r.probes[probe-1].at = true, now
	}
	hung := r.notice(now)
	if r.open {
		if !judges {
			return stay, hung
		}
		switch o {
		case success:
			r.open, r.events = false, nil
			return becameClosed, hung
		case failure:
			r.next = now.Add(r.pol.ProbeInterval)
		default:
			r.next = now
		}
		return stay, hung
	}
	if o == neutral {
		return stay, hung
	}
	r.events = append(r.events, refEvent{now, o == failure})
	calls, fails := r.window(now)
	if o == failure && calls >= r.pol.MinCalls && float64(fails) >= r.pol.FailureRatio*float64(calls) {
		r.open, r.next, r.events = true, now.Add(r.pol.ProbeInterval), nil
		return becameOpen, hung
	}
	return stay, hung
}

func (r *refBreaker) idle(now time.Time, waiters int64) (bool, probeID) {
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
	seeds := quickSize(t, uint64(200), 20)
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		pol := BreakerPolicy{
			Window:        time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond,
			FailureRatio:  []float64{0.1, 0.5, 0.8, 1}[rng.IntN(4)],
			MinCalls:      1 + rng.IntN(30),
			ProbeInterval: time.Duration(1+rng.IntN(50)) * 10 * time.Millisecond,
		}
		limit := time.Duration(1+rng.IntN(40)) * 10 * time.Millisecond
		failP := rng.Float64()     // this run's share of failures
		hangP := rng.Float64() / 2 // this run's share of attempts that hang
		b, ref := newBreaker(pol, limit), &refBreaker{pol: pol, limit: limit}
		now := time.Unix(1_700_000_000, 0)
		type attempt struct {
			probe probeID
			hangs bool
		}
		var running []attempt
		var opens, hungSeen int64
		for step := 0; step < 3000; step++ {
			at := func(what string) string { return fmt.Sprintf("seed %d step %d: %s", seed, step, what) }
			switch op := rng.IntN(12); {
			case op < 4: // a lane asks to start an attempt
				a := b.allow(now)
				wp, wok, wwait, whung := ref.allow(now)
				if a.probe != wp || a.ok != wok || a.hung != whung {
					t.Fatalf("%s: allow = (probe %d, ok %v, hung %d), want (%d, %v, %d)", at("allow"), a.probe, a.ok, a.hung, wp, wok, whung)
				}
				if !a.ok && (a.wait != wwait || a.closed == nil) {
					t.Fatalf("%s: refused with wait %v (want %v: when the next probe may start), channel %v",
						at("allow"), a.wait, wwait, a.closed)
				}
				if !a.ok && (a.wait <= 0 || a.wait > pol.ProbeInterval) {
					t.Fatalf("%s: wait %v outside (0, ProbeInterval]", at("allow"), a.wait)
				}
				hungSeen += int64(boolN(a.hung != 0))
				if a.ok {
					running = append(running, attempt{a.probe, rng.Float64() < hangP})
				}
			case op < 8 && len(running) > 0: // an attempt ends; a hung one rarely (late)
				i := rng.IntN(len(running))
				a := running[i]
				if a.hangs && rng.IntN(10) > 0 {
					break
				}
				running = slices.Delete(running, i, i+1)
				o := success
				if r := rng.Float64(); r < 0.05 {
					o = neutral
				} else if r < failP {
					o = failure
				}
				got, ghung := b.report(now, a.probe, o)
				want, whung := ref.report(now, a.probe, o)
				if got != want || ghung != whung {
					t.Fatalf("%s: report(probe %d, %v) = (%v, hung %d), want (%v, %d)", at("report"), a.probe, o, got, ghung, want, whung)
				}
				hungSeen += int64(boolN(ghung != 0))
				opens += int64(boolN(got == becameOpen))
			case op < 9: // the watchdog's tick
				w := int64(rng.IntN(2))
				b.waiters.Store(w)
				gidle, ghung := b.idle(now)
				widle, whung := ref.idle(now, w)
				if gidle != widle || ghung != whung {
					t.Fatalf("%s: idle(waiters %d) = (%v, hung %d), want (%v, %d)", at("idle"), w, gidle, ghung, widle, whung)
				}
				hungSeen += int64(boolN(ghung != 0))
			default: // time passes: within a bucket, or across windows
				now = now.Add(time.Duration(rng.Int64N(int64(pol.Window) / 3)))
			}
			st := b.snapshot(now)
			if st.Open != ref.open || b.openNow() != ref.open {
				t.Fatalf("%s: open %v (flag %v), want %v", at("state"), st.Open, b.openNow(), ref.open)
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
		st := b.snapshot(now)
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
