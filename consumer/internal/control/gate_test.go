package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestGatePauseResume: a paused session's waiters are woken once, when
// it is resumed, not when its setting changes otherwise; a waiter woken
// early (an old wake) is told to wait again, and Forget drops a waiter.
func TestGatePauseResume(t *testing.T) {
	g := NewGate("g", Limit{}, nil)
	now := time.Unix(1000, 0)
	k := Key{"chats", "s"}
	g.Apply(k, Setting{Paused: true}, now)
	woken := map[int]int{}
	for id := range 3 {
		var tk Ticket
		if v := g.Admit(k, "", &tk, now, id, func() { woken[id]++ }); !v.Paused {
			t.Fatalf("paused session admitted: %+v", v)
		}
	}
	g.Forget(k, 2)
	for _, w := range g.Apply(k, Setting{Paused: true, Rate: 5}, now) { // still paused
		w()
	}
	if len(woken) != 0 {
		t.Fatalf("woken while still paused: %v", woken)
	}
	for _, w := range g.Apply(k, Setting{}, now) {
		w()
	}
	if woken[0] != 1 || woken[1] != 1 || woken[2] != 0 {
		t.Fatalf("wakes after resume: %v; want waiters 0 and 1 once, 2 (forgotten) never", woken)
	}
	if s := g.Snapshot(); len(s) != 0 {
		t.Fatalf("settings left after a tombstone: %+v", s)
	}
}

// TestGateTidy: idle default buckets and idle resources are forgotten;
// a session's own bucket and a resource with a slot held are kept.
func TestGateTidy(t *testing.T) {
	g := NewGate("g", Limit{Rate: 10, Burst: 1}, func(string) Limit { return Limit{Rate: 10, Concurrency: 1} })
	now := time.Unix(1000, 0)
	g.Apply(Key{"t", "own"}, Setting{Rate: 1}, now)
	for _, s := range []string{"a", "b", "own"} {
		var tk Ticket
		g.Admit(Key{"t", s}, "r1", &tk, now, s, func() {})
	}
	if held, ok := g.TrySlot("r2", now); !held || !ok {
		t.Fatal("no slot of r2")
	}
	if _, b, r := g.Sizes(); b != 3 || r != 2 {
		t.Fatalf("%d buckets, %d resources; want 3, 2", b, r)
	}
	g.Tidy(now.Add(time.Minute))
	if _, b, r := g.Sizes(); b != 1 || r != 1 {
		t.Fatalf("after Tidy: %d buckets, %d resources; want 1 (own), 1 (r2, a slot held)", b, r)
	}
	g.Release("r2")
	g.Tidy(now.Add(time.Minute))
	if _, _, r := g.Sizes(); r != 0 {
		t.Fatalf("after the slot's release: %d resources; want 0", r)
	}
}

// TestGateSlots: a resource's slots go first come, first served; a waiter
// whose context ends gives up without a slot.
func TestGateSlots(t *testing.T) {
	g := NewGate("g", Limit{}, func(string) Limit { return Limit{Concurrency: 1} })
	now := time.Unix(1000, 0)
	if held, ok := g.TrySlot("db", now); !held || !ok {
		t.Fatal("first slot not taken")
	}
	if _, ok := g.TrySlot("db", now); ok {
		t.Fatal("a second slot taken past Concurrency 1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if held, err := g.Slot(ctx, "db", now); held || err == nil {
		t.Fatalf("Slot with an ended context: %v %v", held, err)
	}
	got := make(chan bool)
	go func() {
		held, err := g.Slot(context.Background(), "db", now)
		got <- held && err == nil
	}()
	g.Release("db")
	if !<-got {
		t.Fatal("the waiter did not get the slot given back")
	}
	g.Release("db")
}

// TestGateModel drives a gate with random pauses, resumes, limits and
// asks, on a random clock, against a plain model: a paused session is
// never admitted; each of its waiters is woken exactly once, when it
// resumes; a session's tokens are never taken faster than its limit
// (burst + rate × time, from when the limit was set: a record that
// waited for its token has it from the time it was told); a waiter told to
// wait until T and asking early is told T again.
func TestGateModel(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { gateModel(t, seed) })
	}
}

var debugModel = false

type modelSession struct {
	paused     bool
	rate       float64
	burst      int
	since      time.Time   // the limit's start
	admitted   []time.Time // since then
	waiting    bool        // a waiter is kept for its resume
	woken      int
	ticket     Ticket
	until      time.Time
	defaultLim bool
}

func gateModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	def := Limit{}
	if r.IntN(2) == 0 {
		def = Limit{Rate: float64(1 + r.IntN(20)), Burst: 1 + r.IntN(3)}
	}
	g := NewGate("g", def, nil)
	now := time.Unix(1_000_000, 0)
	ss := map[Key]*modelSession{}
	keys := []Key{{"t", "a"}, {"t", "b"}, {"u", "a"}}
	for _, k := range keys {
		ss[k] = &modelSession{since: now, rate: def.Rate, burst: max(def.Burst, 1), defaultLim: true}
	}
	for step := range 300 {
		k := keys[r.IntN(len(keys))]
		m := ss[k]
		if debugModel {
			t.Logf("step %d key %v now %v m %+v", step, k, now.UnixMilli(), *m)
		}
		switch op := r.IntN(10); {
		case op < 2: // an operator's entry
			s := Setting{Paused: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				s.Rate, s.Burst = float64(1+r.IntN(50)), r.IntN(4)
			}
			wasPaused := m.paused
			wakes := g.Apply(k, s, now)
			for _, w := range wakes {
				w()
			}
			m.paused = s.Paused
			newOwn, wasOwn := s.Rate > 0, !m.defaultLim
			if newOwn && (!wasOwn || s.Rate != m.rate || max(s.Burst, 1) != m.burst) || !newOwn && wasOwn {
				m.admitted, m.since, m.until = nil, now, time.Time{} // a new limit, a new bucket: checked from now, it decides a wait
			}
			if s.Rate > 0 {
				m.rate, m.burst, m.defaultLim = s.Rate, max(s.Burst, 1), false
			} else {
				m.rate, m.burst, m.defaultLim = def.Rate, max(def.Burst, 1), true
			}
			if wasPaused && !s.Paused && m.waiting {
				if m.woken != 1 {
					t.Fatalf("step %d: %v resumed; its waiter woken %d times, want 1", step, k, m.woken)
				}
				m.waiting, m.woken = false, 0
			}
			if s.Paused && m.woken != 0 {
				t.Fatalf("step %d: %v still paused; its waiter was woken", step, k)
			}
		case op < 8: // its lane asks
			if m.waiting {
				continue // asleep until its resume
			}
			early := !m.until.IsZero() && now.Before(m.until)
			v := g.Admit(k, "", &m.ticket, now, k, func() {
				if m.waiting {
					m.woken++ // its resume
				} else {
					m.until = time.Time{} // its limit changed: it asks again, the new limit decides
				}
			})
			switch {
			case v.Paused:
				if !m.paused {
					t.Fatalf("step %d: %v told paused; it is not", step, k)
				}
				m.waiting, m.until = true, time.Time{} // its token given back
			case v.Go:
				if m.paused {
					t.Fatalf("step %d: %v admitted while paused", step, k)
				}
				if early {
					t.Fatalf("step %d: %v admitted at %v before its token at %v", step, k, now, m.until)
				}
				at := now // the token's time: a record that waited for one has it from then
				if !m.until.IsZero() {
					at = m.until
				}
				m.admitted = append(m.admitted, at)
				m.ticket, m.until = Ticket{}, time.Time{}
				checkModelRate(t, step, k, m)
			default:
				if early && !v.Until.Equal(m.until) {
					t.Fatalf("step %d: %v asked early: told %v, before %v", step, k, v.Until, m.until)
				}
				m.until = v.Until
			}
		case op < 9:
			now = now.Add(time.Duration(r.IntN(200)) * time.Millisecond)
		default:
			g.Tidy(now)
		}
	}
}

// checkModelRate: no n+burst admissions in less than n/rate since the
// session's limit was set.
func checkModelRate(t *testing.T, step int, k Key, m *modelSession) {
	t.Helper()
	if m.rate == 0 {
		return
	}
	ats := m.admitted
	for i := range ats {
		for j := i + m.burst; j < len(ats); j++ {
			least := time.Duration(float64(j-i-m.burst+1) / m.rate * float64(time.Second))
			if ats[j].Sub(ats[i]) < least-time.Microsecond {
				t.Fatalf("step %d: %v admitted %d times in %v at %v/s, burst %d", step, k, j-i+1, ats[j].Sub(ats[i]), m.rate, m.burst)
			}
		}
	}
}
