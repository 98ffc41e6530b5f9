package consumer

import (
	"slices"
	"testing"

	"github.com/lanesdev/lanes/hashring"
)

// TestLaneOrderByStamp: a record stamped with an older count of its topic
// goes ahead of the topic's other partitions' newer records, never ahead
// of its own partition's or another topic's; an older record wakes a wait.
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
	if x := w.s.takeOlder(w); x == nil || x.session != "older" {
		t.Fatalf("takeOlder = %v, want the older record", x)
	}
}
