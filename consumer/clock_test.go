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
