package lanestest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// history builds call histories on a fixed clock.
type history struct {
	t0 time.Time
	l  *Ledger
}

func newHistory(t *testing.T, sessions map[string]int) *history {
	t.Helper()
	h := &history{t0: time.Now(), l: NewLedger()}
	for s, n := range sessions {
		for seq := 0; seq < n; seq++ {
			h.l.Acked(s, seq, id(s, seq))
		}
	}
	return h
}

func id(session string, seq int) string { return session + "-" + strconv.Itoa(seq) }

// call records a call of member on session's seq from start to end (ms):
// ok is success, final marks the message ended (success or permanent).
// The record is at offset seq.
func (h *history) call(member, session string, seq, start, end int, ok, final bool) {
	h.callAt(member, session, seq, int64(seq), start, end, ok, final)
}

// callAt is call on the record at offset: a message re-sent by the
// producer has the same event ID at another offset.
func (h *history) callAt(member, session string, seq int, offset int64, start, end int, ok, final bool) {
	at := func(ms int) time.Time { return h.t0.Add(time.Duration(ms) * time.Millisecond) }
	h.l.RecordCall(Call{Member: member, Session: session, Seq: -1, EventID: id(session, seq), Offset: offset,
		Start: at(start), End: at(end), OK: ok, Final: final})
}

// TestLedgerCatches feeds the ledger histories with one known fault each;
// each must be found and nothing else, so a clean report means something.
func TestLedgerCatches(t *testing.T) {
	cases := []struct {
		name string
		feed func(h *history)
		want Report // only the fault counts are compared
	}{
		{"clean", func(h *history) {
			h.call("x", "a", 0, 0, 10, false, false) // transient, retried
			h.call("x", "a", 0, 11, 20, true, true)
			h.call("x", "a", 1, 20, 30, true, true)
		}, Report{}},
		{"order violation", func(h *history) {
			h.call("x", "a", 0, 0, 10, true, true)
			h.call("y", "a", 1, 5, 20, true, true) // another member starts seq 1 before seq 0 ended
		}, Report{Violations: 1, Overlaps: 1}},
		{"out of order, no overlap", func(h *history) {
			h.call("x", "a", 1, 0, 10, true, true) // seq 1 first
			h.call("x", "a", 0, 11, 20, true, true)
		}, Report{Violations: 1, Regressions: 1}},
		{"overlap on a retry", func(h *history) {
			h.call("x", "a", 0, 0, 10, false, false)
			h.call("y", "a", 0, 5, 15, true, true) // a retry while the first attempt ran
			h.call("x", "a", 1, 15, 20, true, true)
		}, Report{Overlaps: 1}},
		{"lost", func(h *history) {
			h.call("x", "a", 0, 0, 10, true, true)
			h.call("x", "a", 1, 10, 20, false, false) // never finished, never dead-lettered
		}, Report{Lost: 1}},
		{"duplicate and regression", func(h *history) {
			h.call("x", "a", 0, 0, 10, true, true)
			h.call("x", "a", 1, 10, 20, true, true)
			h.call("x", "a", 0, 20, 30, true, true) // redelivered to the same member
		}, Report{Duplicates: 1, Redeliveries: 1, Regressions: 1}},
		{"re-sent by the producer", func(h *history) {
			h.call("x", "a", 0, 0, 10, true, true)
			h.call("x", "a", 1, 10, 20, true, true)
			h.callAt("x", "a", 1, 2, 20, 30, true, true) // the same event ID again, at offset 2
		}, Report{Duplicates: 1, Resends: 1}},
		{"dead-lettered", func(h *history) {
			h.call("x", "a", 0, 0, 10, false, true) // permanent failure
			h.l.DeadLettered(id("a", 0), "permanent")
			h.call("x", "a", 1, 10, 20, true, true)
		}, Report{DeadLettered: 1}},
		{"retries exhausted, then dead-lettered", func(h *history) {
			h.call("x", "a", 0, 0, 10, false, false) // the last attempt: not final to the handler
			h.l.DeadLettered(id("a", 0), "retries-exhausted")
			h.call("x", "a", 1, 10, 20, true, true)
		}, Report{DeadLettered: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(t, map[string]int{"a": 2})
			tc.feed(h)
			r := h.l.Report()
			got := Report{Violations: r.Violations, Overlaps: r.Overlaps, Regressions: r.Regressions,
				Lost: r.Lost, Duplicates: r.Duplicates, Redeliveries: r.Redeliveries, Resends: r.Resends,
				DeadLettered: r.DeadLettered}
			if got.String() != tc.want.String() {
				t.Fatalf("report %v\nwant   %v\n%v", r, tc.want, r.Details)
			}
			clean := tc.want.Violations+tc.want.Overlaps+tc.want.Lost+tc.want.Regressions == 0
			if err := r.Err(false); (err == nil) != clean {
				t.Fatalf("Err = %v, want clean %v", err, clean)
			}
		})
	}
}

// TestLedgerAccounting: a message is accounted for once it was acknowledged
// and either finished or reached the dead-letter topic, in any order.
func TestLedgerAccounting(t *testing.T) {
	l := NewLedger()
	l.RecordCall(Call{Session: "a", Seq: -1, EventID: "a-0", Final: true, OK: true}) // handled before its ack arrived
	if got := l.Accounted(); got != 0 {
		t.Fatalf("Accounted before the ack = %d", got)
	}
	l.Acked("a", 0, "a-0")
	l.Acked("a", 1, "a-1")
	l.Acked("a", 2, "a-2")
	l.DeadLettered("a-1", "permanent")
	l.RecordCall(Call{Session: "a", Seq: -1, EventID: "a-2", Final: false}) // transient: not yet
	if got := l.Accounted(); got != 2 {
		t.Fatalf("Accounted = %d, want 2", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitAccounted(ctx, 3); err == nil {
		t.Fatal("WaitAccounted(3) returned nil with 2 accounted for")
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitAccounted(context.Background(), 3) }()
	l.RecordCall(Call{Session: "a", Seq: -1, EventID: "a-2", Final: true, OK: true})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.AckedCount() != 3 {
		t.Fatalf("AckedCount = %d", l.AckedCount())
	}
}

// TestCallsWithoutEventIDs: records with no lanes event ID (another
// client's) are placed by the session and seq the handler reports.
func TestCallsWithoutEventIDs(t *testing.T) {
	l := NewLedger()
	t0 := time.Now()
	l.RecordCall(Call{Session: "j", Seq: 1, Start: t0, End: t0.Add(time.Millisecond), Final: true, OK: true})
	l.RecordCall(Call{Session: "j", Seq: 0, Start: t0.Add(2 * time.Millisecond), End: t0.Add(3 * time.Millisecond), Final: true, OK: true})
	l.RecordCall(Call{Session: "j", Seq: -1, Start: t0.Add(4 * time.Millisecond), End: t0.Add(5 * time.Millisecond)}) // unplaced: ignored
	if r := l.Report(); r.Violations != 1 || r.Calls != 3 || r.Sessions != 1 {
		t.Fatalf("report %v, want 1 violation over 3 calls", r)
	}
}

// TestLedgerTopics: a session sent to two topics is ordered per topic
// (lanes does not order one session across topics) while overlaps count
// across them; a record is its topic, partition and offset; seqs never
// sent are no gap.
func TestLedgerTopics(t *testing.T) {
	const orders, audit = "orders", "audit"
	on := func(h *history, topic string, seq int, offset int64, start, end int) {
		at := func(ms int) time.Time { return h.t0.Add(time.Duration(ms) * time.Millisecond) }
		h.l.RecordCall(Call{Member: "x", Session: "a", Seq: -1, EventID: id("a", seq), Topic: topic,
			Offset: offset, Start: at(start), End: at(end), OK: true, Final: true})
	}
	cases := []struct {
		name string
		feed func(h *history)
		want Report
	}{
		{"the other topic's record first", func(h *history) {
			on(h, audit, 1, 0, 0, 10) // seq 1 (audit) arrived before seq 0 (orders)
			on(h, orders, 0, 0, 10, 20)
			on(h, orders, 2, 1, 20, 30)
		}, Report{}},
		{"out of order within a topic", func(h *history) {
			on(h, orders, 2, 1, 0, 10) // seq 2 before seq 0, both on orders
			on(h, orders, 0, 0, 10, 20)
			on(h, audit, 1, 0, 20, 30)
		}, Report{Violations: 1, Regressions: 1}},
		{"overlap across topics", func(h *history) {
			on(h, orders, 0, 0, 0, 10)
			on(h, audit, 1, 0, 5, 15) // one lane per session: never at once
			on(h, orders, 2, 1, 15, 20)
		}, Report{Overlaps: 1}},
		{"same offset on another topic", func(h *history) {
			on(h, orders, 0, 0, 0, 10)
			on(h, audit, 0, 0, 10, 20) // seq 0 re-sent to audit: another record
			on(h, audit, 1, 1, 20, 30)
			on(h, orders, 2, 1, 30, 40)
		}, Report{Duplicates: 1, Resends: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(t, map[string]int{"a": 3})
			tc.feed(h)
			r := h.l.Report()
			got := Report{Violations: r.Violations, Overlaps: r.Overlaps, Regressions: r.Regressions,
				Lost: r.Lost, Duplicates: r.Duplicates, Redeliveries: r.Redeliveries, Resends: r.Resends}
			if got.String() != tc.want.String() {
				t.Fatalf("report %v\nwant   %v\n%v", r, tc.want, r.Details)
			}
		})
	}

	// One ledger per consumer: the orders ledger holds seqs 0 and 2 only.
	h := newHistory(t, nil)
	h.l.Acked("a", 0, id("a", 0))
	h.l.Acked("a", 2, id("a", 2))
	on(h, orders, 0, 0, 0, 10)
	on(h, orders, 2, 1, 10, 20)
	if r := h.l.Report(); r.Err(false) != nil || r.Messages != 2 {
		t.Fatalf("seqs 0 and 2 of one topic: %v %v", r, r.Details)
	}
	// A lost message still holds up the next, whatever its topic.
	h = newHistory(t, map[string]int{"a": 3})
	on(h, orders, 0, 0, 0, 10)
	on(h, audit, 2, 0, 10, 20) // seq 1 was acknowledged and never handled
	if r := h.l.Report(); r.Lost != 1 || r.Violations != 1 {
		t.Fatalf("seq 1 lost: %v, want 1 lost and seq 2 a violation", r)
	}
}
