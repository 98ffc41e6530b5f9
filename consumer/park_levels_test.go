package consumer

import (
	"math"
	"testing"
)

// TestParkLevels: a parked session's oldest placement count is that of
// its records not yet done: it rises as its head passes the records of an
// older count, and starts anew when the session parks again. (Before, the
// oldest count since it was first parked stayed for good, and two
// partitions each naming a session parked on both held its retries on
// both for ever.)
func TestParkLevels(t *testing.T) {
	var pl parkLevels
	pl.note("s", 5, 3, false)
	pl.note("s", 6, 3, true)
	pl.note("s", 9, 6, true)
	pl.note("s", 10, 0, true) // unstamped: oldest of all
	pl.note("s", 11, 6, true)
	for _, tc := range []struct {
		head int64
		want int
	}{{5, 0}, {6, 0}, {9, 0}, {10, 0}, {11, 6}} {
		if got, ok := pl.oldest("s", tc.head); !ok || got != tc.want {
			t.Fatalf("oldest from head %d = %d, %v; want %d", tc.head, got, ok, tc.want)
		}
	}
	pl.note("s", 20, 4, false) // parked again after it was done
	if got, _ := pl.oldest("s", 20); got != 4 {
		t.Fatalf("oldest after parking again = %d, want 4", got)
	}
	if _, ok := pl.oldest("other", 0); ok {
		t.Fatal("a session never parked has an oldest count")
	}
}

// TestParkedNamesAfterGrowth: before its rebuild, a new owner says what
// the commit it took over at named; once the topic grew again since, all
// of them with that commit's newest count at the most (a session that
// commit left unnamed may have records of that count parked). A session
// held with nothing left parked counts all its records.
func TestParkedNamesAfterGrowth(t *testing.T) {
	g := partGrow{fromParked: parkedOld{named: []parkedAt{{0x1f, 2}}}, fromNewest: 4}
	if po := g.fromParkedAt(4); po.all || len(po.named) != 1 {
		t.Fatalf("same newest: %+v, want the commit's names", po)
	}
	if po := g.fromParkedAt(8); !po.all || po.level != 2 || !po.has("any", 8) || po.has("any", 2) {
		t.Fatalf("grown to 8: %+v, want all from count 2", po)
	}
	g = partGrow{fromParked: parkedOld{}, fromNewest: 4}
	if po := g.fromParkedAt(8); !po.all || po.level != 4 || !po.has("any", 8) {
		t.Fatalf("grown to 8 from a commit naming none: %+v, want all from count 4", po)
	}
	var pl parkLevels
	pl.note("held", 3, 2, false)
	pl.note("held", 7, 4, true)
	if got, ok := pl.oldest("held", math.MinInt64); !ok || got != 2 {
		t.Fatalf("held with nothing left: oldest %d, %v; want 2", got, ok)
	}
}
