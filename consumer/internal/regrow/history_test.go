package regrow

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

func TestSegmentRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_733_333_333_000)
	for _, h := range []History{{Counts: []int{8}}, {Counts: []int{8}, Settled: true}, {Counts: []int{2, 8}, Since: at}, {Counts: []int{2, 4, 8}, Since: at}} {
		got, err := ParseSegment(h.Segment())
		if err != nil || !slices.Equal(got.Counts, h.Counts) || !got.Since.Equal(h.Since) || got.Settled != h.Settled {
			t.Fatalf("ParseSegment(%q) = %+v, %v; want %+v", h.Segment(), got, err, h)
		}
	}
	for _, s := range []string{"", "0", "8,2@1", "2,8", "8@1", "2,8@", "2,8@-1", "x", "2,2@1", "2,8!", "2,8@1!", "!"} {
		if _, err := ParseSegment(s); !errors.Is(err, ErrBadSegment) {
			t.Errorf("ParseSegment(%q) err = %v, want ErrBadSegment", s, err)
		}
	}
}

func TestLearn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h History
	if !h.Learn([]int{2}, time.Time{}, t0) || h.Changing() || !h.Since.IsZero() {
		t.Fatalf("first count: %+v", h)
	}
	if !h.Learn([]int{8}, time.Time{}, t0.Add(time.Second)) || !h.Changing() || !h.Since.Equal(t0.Add(time.Second)) {
		t.Fatalf("a growth seen now: %+v", h)
	}
	if !h.Learn([]int{2, 8}, t0, t0.Add(2*time.Second)) || !h.Since.Equal(t0) {
		t.Fatalf("an earlier word of the same growth: %+v", h)
	}
	if h.Learn([]int{2, 8}, t0.Add(time.Minute), t0.Add(3*time.Second)) || !h.Since.Equal(t0) {
		t.Fatalf("a later word changes nothing: %+v", h)
	}
	if h.Observe(3, t0) || !slices.Equal(h.Counts, []int{2, 8}) {
		t.Fatalf("a count below the newest, from a stale listing, changes nothing: %+v", h)
	}
	h.Learn([]int{9}, time.Time{}, t0)
	h.Settle()
	if !slices.Equal(h.Counts, []int{9}) || !h.Since.IsZero() || !h.Settled || h.Segment() != "9!" {
		t.Fatalf("settled: %+v", h)
	}
	if h.Learn([]int{2, 9}, t0, t0) || h.Changing() {
		t.Fatalf("a commit from before the settle opened the change again: %+v", h)
	}
	if !h.Learn([]int{12}, time.Time{}, t0) || !slices.Equal(h.Counts, []int{9, 12}) || h.Settled {
		t.Fatalf("a newer count after a settle: %+v", h)
	}
}

// TestOldHomes checks OldHomes against the placements it stands for: the
// key's partition under every count from the oldest known up to the
// stamp's, other than the record's own.
func TestOldHomes(t *testing.T) {
	h := History{Counts: []int{2, 4, 8}}
	for i := range 500 {
		key := []byte{byte(i), byte(i >> 8), 'k'}
		for _, sc := range []hashring.Scheme{hashring.SchemeKafka, hashring.SchemeJump} {
			pl := hashring.Placement{Scheme: sc, Count: 8}
			p, _ := pl.Partition(key, 8)
			got := OldHomes(h, pl, key, int32(p))
			var want []int32
			for c := 2; c < 8; c++ {
				q, _ := pl.Partition(key, c)
				if q != p && !slices.Contains(want, int32(q)) {
					want = append(want, int32(q))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v key %x: OldHomes = %v, want %v", pl, key, got, want)
			}
			if len(OldHomes(h, hashring.Placement{Scheme: sc, Count: 2}, key, 0)) != 0 {
				t.Fatal("a record stamped with the oldest count has no older home")
			}
		}
	}
}
