package consumer

import (
	"context"
	"testing"
	"time"
)

func TestStamps(t *testing.T) {
	before := time.Now()
	a := stampNow()
	time.Sleep(time.Millisecond) // a real interval to measure, not a synchronisation
	b := stampOf(time.Now())
	if a <= 0 || b-a < int64(time.Millisecond) {
		t.Fatalf("stamps %d then %d a millisecond later; want positive and at least 1ms apart", a, b)
	}
	// A stamp turned back into a time is that instant: after what was read
	// before it, before what was read after, with a monotonic reading.
	at := timeOfStamp(a)
	if at.Before(before) || !at.Before(time.Now()) {
		t.Fatalf("stamp %d is %v: not between %v and now", a, at, before)
	}
	if at == at.Round(0) {
		t.Fatal("the time of a stamp has no monotonic reading: comparisons would follow wall clock steps")
	}
	if d := timeOfStamp(a + int64(time.Hour)).Sub(at); d != time.Hour {
		t.Fatalf("an hour's stamps apart are %v apart as times", d)
	}
}

// An attempt's deadline, kept as a stamp, reads as its start plus the
// timeout, the same instant on every call and through derived contexts.
func TestAttemptDeadlineFromStamp(t *testing.T) {
	before := time.Now()
	a := newAttemptCtx(context.Background(), stampNow(), time.Hour)
	defer a.release()
	after := time.Now()
	d, ok := a.Deadline()
	if !ok || d.Before(before.Add(time.Hour)) || d.After(after.Add(time.Hour)) {
		t.Fatalf("deadline %v (%v); want within %v..%v", d, ok, before.Add(time.Hour), after.Add(time.Hour))
	}
	if again, _ := a.Deadline(); !again.Equal(d) {
		t.Fatalf("deadline read again is %v, was %v", again, d)
	}
	ctx, cancel := context.WithTimeout(a, 2*time.Hour)
	defer cancel()
	if dd, _ := ctx.Deadline(); !dd.Equal(d) {
		t.Fatalf("a context derived with a later timeout has deadline %v, want the attempt's %v", dd, d)
	}
	if left := time.Until(d); left <= 59*time.Minute || left > time.Hour {
		t.Fatalf("time.Until(deadline) = %v, want just under an hour", left)
	}
}
