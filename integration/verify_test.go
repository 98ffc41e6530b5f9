package integration

import (
	"testing"
	"time"
)

// TestLedgerCatches feeds the verifier histories with known faults; each
// must be found, so the scenarios' zero counts mean something.
func TestLedgerCatches(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(m, s string, seq, start, end int, ok bool) Call {
		return Call{Member: m, Session: s, Seq: seq, EventID: s + string(rune('0'+seq)), Start: at(start), End: at(end), Final: ok, OK: ok}
	}
	l := NewLedger()
	for seq := 0; seq < 4; seq++ {
		l.Sent("a", seq, "a"+string(rune('0'+seq)))
	}
	l.Sent("b", 0, "b0")
	l.Handled(call("x", "a", 0, 0, 10, true))
	l.Handled(call("x", "a", 1, 5, 20, true))   // starts before seq 0 finished: violation
	l.Handled(call("x", "a", 2, 20, 30, false)) // transient
	l.Handled(call("x", "a", 2, 31, 40, true))
	l.Handled(call("x", "a", 1, 41, 42, true)) // regression and duplicate
	// a3 never handled: lost. b0 dead-lettered: not lost.
	l.DeadLettered("b0", "permanent")
	r := l.Report()
	if r.Violations != 1 || r.Regressions != 1 || r.Duplicates != 1 || r.Lost != 1 || r.DeadLettered != 1 {
		t.Fatalf("report %v; want 1 violation, 1 regression, 1 duplicate, 1 lost, 1 DLQ\n%v", r, r.Details)
	}
	if l.Finished() != 3 {
		t.Fatalf("Finished = %d, want 3", l.Finished())
	}
}
