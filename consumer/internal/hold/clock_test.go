package hold

import (
	"testing"
	"time"
)

// TestHoldClock: the time held is the union of the holds' spells (two at
// once count once), read at any instant; repeated or unmatched begins and
// ends change nothing; a nil clock is never held.
func TestHoldClock(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var h Clock
	want := func(s float64, total time.Duration, on Kind) {
		t.Helper()
		if r := h.Read(at(s)); r.Total != total || r.On != on {
			t.Fatalf("at %vs: %v held, %q in force; want %v, %q", s, r.Total, r.On, total, on)
		}
	}
	want(0, 0, 0)
	h.Set(Breaker, false, at(1)) // not in force: ignored
	want(2, 0, 0)
	h.Set(Silence, true, at(2))
	want(3, time.Second, Silence)
	h.Set(Silence, true, at(3)) // again: the spell goes on from 2
	h.Set(Breaker, true, at(4))
	want(5, 3*time.Second, Silence|Breaker)
	h.Set(Silence, false, at(6))
	want(7, 5*time.Second, Breaker)
	h.Set(Breaker, false, at(8))
	want(20, 6*time.Second, 0)
	h.Set(Breaker, true, at(30))
	h.Set(Breaker, false, at(31))
	want(40, 7*time.Second, 0)
	if got := (Silence | Breaker).String(); got != "silence hold, breaker open" {
		t.Fatalf("String: %q", got)
	}
	var none *Clock
	none.Set(Silence, true, t0)
	if r := none.Read(at(9)); r != (Reading{}) {
		t.Fatalf("nil clock: %+v", r)
	}
}
