package regrow

import (
	"testing"
	"time"
)

// olds is an Olds with fixed answers.
type olds struct {
	floor  int64
	parked map[int32]bool
}

func (o olds) Floor(string, int32, int) (int64, bool)         { return o.floor, true }
func (o olds) Parked(_ string, q int32, _ string, _ int) bool { return o.parked[q] }

// TestReleaseParked: a wait whose old partitions' floors passed its
// barriers is released, unless its session is parked on one of them:
// then, with parking, it ends parked (ParkedOn names that partition; the
// session's later records follow it, their retry checks the old partition);
// without parking, it waits on until the old partition no longer names the
// session.
func TestReleaseParked(t *testing.T) {
	at := Part{"t", 3}
	enter := func(h *Holds) *Wait {
		w := h.Enter(at, "s", 4, []int32{0, 1}, time.Unix(1, 0))
		h.Measured("t", 0, 10, time.Unix(2, 0))
		h.Measured("t", 1, 10, time.Unix(2, 0))
		return w
	}
	parked := olds{floor: 10, parked: map[int32]bool{1: true}}

	var h Holds
	w := enter(&h)
	if r, p := h.Release(parked, false); r != 0 || p != 0 || h.Len() != 1 {
		t.Fatalf("without parking: released %d, parked %d, waiting %d; want the wait kept", r, p, h.Len())
	}
	if r, p := h.Release(olds{floor: 9}, true); r != 0 || p != 0 {
		t.Fatalf("floors short of the ends: released %d, parked %d", r, p)
	}
	if r, p := h.Release(parked, true); r != 0 || p != 1 || w.ParkedOn != 1 {
		t.Fatalf("with parking: released %d, parked %d, ParkedOn %d; want parked on 1", r, p, w.ParkedOn)
	}
	<-w.Released
	h.Leave(w)
	if enter(&h) != nil {
		t.Fatal("a session whose wait ended parked waits again for the same level: its later records follow it to the park topic")
	}
	var h2 Holds
	w = enter(&h2)
	if r, _ := h2.Release(olds{floor: 10}, true); r != 1 || w.ParkedOn != -1 {
		t.Fatalf("not parked: released %d, ParkedOn %d", r, w.ParkedOn)
	}
	h2.Leave(w)
	if enter(&h2) != nil {
		t.Fatal("a released session waits again for the same level")
	}
}
