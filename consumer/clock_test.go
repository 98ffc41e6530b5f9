package consumer

import (
	"testing"
	"time"
)

func TestClockFollowsTheSystemClock(t *testing.T) {
	k := newClock()
	before := time.Now()
	got := k.now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("clock read %v, outside the system clock's %v..%v", got, before, after)
	}
	if got == got.Round(0) {
		t.Fatal("clock reading has no monotonic part: deadlines would follow wall clock steps")
	}
	// Rebased, it reads from the new base on.
	base := time.Now()
	k.rebase(base)
	if got := k.now(); got.Before(base) || got.Sub(base) > time.Minute {
		t.Fatalf("rebased at %v, the clock read %v", base, got)
	}
}

func TestClockStamps(t *testing.T) {
	k := newClock()
	a := k.stamp(k.now())
	time.Sleep(time.Millisecond) // a real interval to measure, not a synchronisation
	b := k.stamp(time.Now())
	if a <= 0 || b-a < int64(time.Millisecond) {
		t.Fatalf("stamps %d then %d a millisecond later; want positive and at least 1ms apart", a, b)
	}
	// A rebase moves what now reads, not the stamps' zero.
	k.rebase(time.Now())
	if c := k.stamp(k.now()); c < b {
		t.Fatalf("stamp after a rebase %d, before it %d: stamps went back", c, b)
	}
}
