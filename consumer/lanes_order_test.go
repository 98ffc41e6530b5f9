package consumer

import (
	"slices"
	"testing"

	"github.com/lanesdev/lanes/hashring"
)

// TestLaneOrderByStamp: a record stamped with an older count of its topic
// goes ahead of the topic's other partitions' newer records, never ahead
// of its own partition's or another topic's; an older record wakes a wait,
// and is taken unless the control gate may hold it; a waiting record given
// back goes behind its session's older records, ahead of the rest.
func TestLaneOrderByStamp(t *testing.T) {
	a0, a5 := &partition{key: partKey{"a", 0}}, &partition{key: partKey{"a", 5}}
	b3 := &partition{key: partKey{"b", 3}}
	rec := func(p *partition, count int, name string) *work {
		w := &work{p: p, session: name}
		w.placed = hashring.Placement{Scheme: hashring.SchemeKafka, Count: count}
		return w
	}
	names := func(l *lane) []string {
		var out []string
		for _, w := range l.queue {
			out = append(out, w.session)
		}
		return out
	}
	l := &lane{}
	l.insertLocked(rec(a5, 8, "new-a5"))
	l.insertLocked(rec(b3, 4, "b3"))     // another topic: its count says nothing of a's
	l.insertLocked(rec(a0, 2, "old-a0")) // a's older count: ahead of a5's newer record
	l.insertLocked(rec(a5, 2, "a5-2"))   // its own partition's order holds
	if got, want := names(l), []string{"old-a0", "new-a5", "b3", "a5-2"}; !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	w := &lane{s: &shard{}}
	wake := w.s.setWait(w, rec(a5, 8, "waiting"), 8)
	w.insertLocked(rec(b3, 4, "other topic"))
	select {
	case <-wake:
		t.Fatal("a record of another topic woke the wait")
	default:
	}
	w.insertLocked(rec(a0, 2, "older"))
	select {
	case <-wake:
	default:
		t.Fatal("an older record of the topic did not wake the wait")
	}
	w.insertLocked(rec(a0, 2, "older2"))
	if x, held := w.s.takeOlder(w, func(*work) bool { return false }); x != nil || !held {
		t.Fatalf("takeOlder = %v, %v with the gate holding the session: want nil, held", x, held)
	}
	if x, held := w.s.takeOlder(w, nil); x == nil || held || x.session != "older" {
		t.Fatalf("takeOlder = %v, %v, want the older record", x, held)
	}
	// Given back (the gate may hold "older2"), the waiting record goes
	// behind the session's older record, ahead of the rest.
	w.s.giveBack(w, []*work{rec(a5, 8, "waiting"), rec(a5, 8, "its batch")})
	if got, want := names(w), []string{"older2", "waiting", "its batch", "other topic"}; !slices.Equal(got, want) || w.took != nil {
		t.Fatalf("given back: queue %v (took %v), want %v", got, w.took, want)
	}
}
