package parkset

import (
	"testing"
	"time"
)

// TestTruncatedReusedOffsets: after a source log truncation at 97 (an
// unclean leader election), the session's floor of the old log (105) no
// longer claims the new records at the reused offsets: the new record at
// 97 is parked (not taken for a duplicate), the done markers of the old
// copies (100, 105) drop only them, in the order they were parked, and the
// new record stays parked until its own marker. Before the fix the new
// record was taken as done before, or dropped by the old copies' markers
// without a retry.
func TestTruncatedReusedOffsets(t *testing.T) {
	now := time.Now()
	ps := New(Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 3}, "g")
	ps.Add("s", 10, 100, now)
	ps.Add("s", 11, 105, now)
	if !ps.Seen("s", 97) {
		t.Fatal("before the truncation 97 is below the floor: seen")
	}
	ps.Truncated(97)
	if ps.Seen("s", 97) || ps.Seen("s", 100) || !ps.Seen("s", 96) {
		t.Fatal("after the truncation at 97: the floor claims new records, or forgot the old log below the cut")
	}
	if !ps.Add("s", 12, 97, now) {
		t.Fatal("the new record at the reused offset 97 was taken for a duplicate copy")
	}
	ps.Done("s", 100, 13, now)
	ps.Done("s", 105, 14, now)
	if h, ok := ps.Head("s"); !ok || h.SrcOffset != 97 || h.ParkOffset != 12 {
		t.Fatalf("after the old copies' done markers: head %+v (%v); want the new record at 97 still parked", h, ok)
	}
	ps.Done("s", 97, 15, now)
	if ps.IsParked("s") {
		t.Fatal("the session is still parked after its last record's done marker")
	}
}

// TestDoneMarkerAfterForgottenFloors: the same after the committed
// watermark passed the old floors (they are forgotten) before the log was
// truncated below them: a marker drops a session's records only in the
// order they were parked.
func TestDoneMarkerAfterForgottenFloors(t *testing.T) {
	now := time.Now()
	ps := New(Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 3}, "g")
	ps.Add("s", 10, 100, now)
	ps.Add("s", 11, 105, now)
	ps.ForgetBelow(106)
	if !ps.Add("s", 12, 97, now) {
		t.Fatal("the record at the reused offset 97 was not parked")
	}
	ps.Done("s", 100, 13, now)
	ps.Done("s", 105, 14, now)
	if h, ok := ps.Head("s"); !ok || h.SrcOffset != 97 {
		t.Fatalf("after the done markers of 100 and 105: head %+v, %v; want the record at 97 still parked", h, ok)
	}
}

// TestOldMarkersKeepFloorBelowCut: after a truncation at 97 with the old
// copies 100 and 105 parked and the new record 97 parked behind them, the
// old copies' done markers do not lift the floor over the cut again: the
// new log's records at 98 to 105, not yet delivered, are not taken for
// done; the new record's own marker raises it to 97. Before the fix the
// old markers raised it to 105 (found by review).
func TestOldMarkersKeepFloorBelowCut(t *testing.T) {
	now := time.Now()
	ps := New(Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 3}, "g")
	ps.Add("s", 10, 100, now)
	ps.Add("s", 11, 105, now)
	ps.Truncated(97)
	ps.Add("s", 12, 97, now)
	ps.Done("s", 100, 13, now)
	ps.Done("s", 105, 14, now)
	for _, off := range []int64{98, 100, 105} {
		if ps.Seen("s", off) {
			t.Errorf("the new log's record at %d, not yet delivered, is taken for done after the old copies' markers", off)
		}
	}
	ps.Done("s", 97, 15, now)
	if !ps.Seen("s", 97) || ps.Seen("s", 98) {
		t.Error("after the new record's marker: want 97 done, 98 not")
	}
	// With no new record parked yet, an old copy's marker lifts nothing.
	ps = New(Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 3}, "g")
	ps.Add("s", 10, 100, now)
	ps.Truncated(97)
	ps.Done("s", 100, 13, now)
	if ps.Seen("s", 97) || ps.Seen("s", 100) {
		t.Error("after the old copy's marker, the new log's records at 97 to 100 are taken for done")
	}
}
