package offsets

import (
	"math/rand/v2"
	"testing"
)

func TestTrackerWatermark(t *testing.T) {
	tr := NewTracker()
	if got := tr.Watermark(); got != -1 {
		t.Fatalf("empty tracker watermark %d, want -1", got)
	}
	tr.SetStart(100)
	if got := tr.Watermark(); got != 100 {
		t.Fatalf("start position not reported: %d", got)
	}
	seqs := map[int64]uint64{}
	for o := int64(100); o <= 104; o++ {
		s, cut := tr.Fetched(o)
		if cut {
			t.Fatalf("fetched(%d) reported a truncation", o)
		}
		seqs[o] = s
	}
	steps := []struct {
		done int64
		want int64
	}{
		{104, 100}, // out of order: 104 done, 100..103 not
		{101, 100},
		{100, 102}, // 100 and 101 done: watermark is 102
		{103, 102}, // 102 still holds it
		{102, 105}, // everything done: one past the newest
	}
	for _, s := range steps {
		tr.Done(seqs[s.done])
		if got := tr.Watermark(); got != s.want {
			t.Fatalf("after done(%d) watermark %d, want %d", s.done, got, s.want)
		}
	}
	if tr.Pending() != 0 {
		t.Fatalf("pending %d after all done", tr.Pending())
	}
}

// Offsets that are never fetched (compaction, transaction markers) must not
// hold the watermark.
func TestTrackerGaps(t *testing.T) {
	tr := NewTracker()
	a, _ := tr.Fetched(10)
	b, _ := tr.Fetched(13) // 11 and 12 compacted away
	c, _ := tr.Fetched(20) // 14..19 were transaction markers
	tr.Done(a)
	if got := tr.Watermark(); got != 13 {
		t.Fatalf("watermark %d, want 13", got)
	}
	tr.Done(c)
	if got := tr.Watermark(); got != 13 {
		t.Fatalf("watermark %d, want 13 (13 not done)", got)
	}
	tr.Done(b)
	if got := tr.Watermark(); got != 21 {
		t.Fatalf("watermark %d, want 21", got)
	}
}

func TestTrackerRepeats(t *testing.T) {
	tr := NewTracker()
	s, _ := tr.Fetched(5)
	tr.Done(s)
	tr.Done(s)      // twice: no effect
	tr.Done(s + 10) // unknown: no effect
	if got := tr.Watermark(); got != 6 {
		t.Fatalf("watermark %d, want 6", got)
	}
}

// TestLogTruncation: after an unclean leader election the broker reuses
// offsets. Records fetched at or above the reused offset are gone from the
// log: they no longer hold the watermark and are never reported as
// completed (which would skip the new records at those offsets after a
// restart); the reused offsets are tracked, and run, as new records.
func TestLogTruncation(t *testing.T) {
	tr := NewTracker()
	var seqs []uint64
	for o := int64(0); o < 10; o++ {
		s, cut := tr.Fetched(o)
		if cut {
			t.Fatalf("fetched(%d) reported a truncation", o)
		}
		seqs = append(seqs, s)
	}
	tr.Done(seqs[0])
	tr.Done(seqs[1])
	tr.Done(seqs[8]) // done above the watermark, then truncated away
	// offsets 2..9 unfinished; the log is cut back to 6 and 6.. reused
	s6, cut := tr.Fetched(6)
	if !cut {
		t.Fatal("fetched(6) after 9 not reported as a truncation")
	}
	tr.DoneAbove(func(o int64) { t.Fatalf("offset %d reported completed; nothing above the watermark is", o) })
	if got := tr.Watermark(); got != 2 {
		t.Fatalf("watermark %d, want 2 (held by the unfinished offset 2)", got)
	}
	for _, s := range seqs[2:6] {
		tr.Done(s)
	}
	if got := tr.Watermark(); got != 6 {
		t.Fatalf("watermark %d, want 6 (the reused offset, not yet done)", got)
	}
	tr.Done(seqs[9]) // the old record at 9 finishing late changes nothing
	tr.Done(s6)
	if got := tr.Watermark(); got != 7 {
		t.Fatalf("watermark %d, want 7", got)
	}
}

func TestTrackerDoneAbove(t *testing.T) {
	tr := NewTracker()
	var seqs []uint64
	for o := int64(0); o < 10; o++ {
		s, _ := tr.Fetched(o)
		seqs = append(seqs, s)
	}
	for _, o := range []int{1, 4, 5, 9} {
		tr.Done(seqs[o])
	}
	var got []int64
	tr.DoneAbove(func(o int64) { got = append(got, o) })
	want := []int64{1, 4, 5, 9}
	if len(got) != len(want) {
		t.Fatalf("doneAbove %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("doneAbove %v, want %v", got, want)
		}
	}
	if o, ok := tr.HeldBy(); !ok || o != 0 {
		t.Fatalf("heldBy = %d, %v", o, ok)
	}
}

// FuzzTracker compares the tracker with a naive model (a map of fetched
// offsets and their state) under random fetch, gap and done sequences, far
// beyond the initial ring size.
func FuzzTracker(f *testing.F) {
	f.Add(int64(1), uint16(300))
	f.Add(int64(99), uint16(2000))
	f.Fuzz(func(t *testing.T, seed int64, n uint16) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		tr := NewTracker()
		type rec struct {
			offset int64
			seq    uint64
			done   bool
		}
		var model []*rec
		offset := rng.Int64N(1000)
		for i := 0; i < int(n); i++ {
			if rng.IntN(3) > 0 || len(model) == 0 {
				offset += 1 + rng.Int64N(3) // gaps
				s, cut := tr.Fetched(offset)
				if cut {
					t.Fatalf("fetched(%d) reported a truncation", offset)
				}
				model = append(model, &rec{offset: offset, seq: s})
			} else {
				r := model[rng.IntN(len(model))]
				tr.Done(r.seq)
				r.done = true
			}
			want := offset + 1
			for _, r := range model {
				if !r.done {
					want = r.offset
					break
				}
			}
			if got := tr.Watermark(); got != want {
				t.Fatalf("step %d: watermark %d, model %d", i, got, want)
			}
		}
	})
}

func BenchmarkTrackerMarkAdvance(b *testing.B) {
	tr := NewTracker()
	const window = 256
	seqs := make([]uint64, 0, window)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, _ := tr.Fetched(int64(i))
		seqs = append(seqs, s)
		if len(seqs) == window {
			// finish the window out of order: odd slots first, then even
			for j := 1; j < window; j += 2 {
				tr.Done(seqs[j])
			}
			for j := 0; j < window; j += 2 {
				tr.Done(seqs[j])
			}
			seqs = seqs[:0]
		}
	}
	_ = tr.Watermark()
}
