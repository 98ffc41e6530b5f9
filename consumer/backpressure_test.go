package consumer

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func recsAt(offsets ...int64) []*kgo.Record {
	out := make([]*kgo.Record, len(offsets))
	for i, o := range offsets {
		out[i] = &kgo.Record{Topic: "t", Offset: o}
	}
	return out
}

// TestStashAcrossTruncation: records stashed while the partition is full,
// then reused offsets (an unclean leader election) stashed behind them,
// reach the lanes in fetch order once it frees up; the truncation is found
// at admission as it would be without the stash, and the watermark ends
// one past the reused offsets once they are done.
func TestStashAcrossTruncation(t *testing.T) {
	told := 0
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 4, func(*partition) { told++ })
	type handed struct {
		offset int64
		seq    uint64
	}
	var out []handed
	admit := func(recs []*kgo.Record) (cut int) {
		_, _, cut = p.admit(recs, 99, nil, func(i int, seq uint64) { out = append(out, handed{recs[i].Offset, seq}) })
		return cut
	}
	admit(recsAt(10, 11, 12, 13))
	if !p.full {
		t.Fatal("4 records held with a bound of 4: not full")
	}
	if !p.hold(recsAt(14, 15, 16, 17), 99) || !p.hold(recsAt(15, 16), 99) {
		t.Fatal("a full partition admitted a fetch")
	}
	if !p.paused || told != 1 {
		t.Fatalf("6 stashed with a bound of 4: fetch paused %v, flow told %d times; want paused, told once", p.paused, told)
	}
	if recs, _ := p.unstash(100); recs != nil {
		t.Fatalf("unstash while full gave %d records", len(recs))
	}
	for _, h := range out {
		p.start(h.seq)
		p.finish(h.seq, true)
	}
	if p.full || told != 2 {
		t.Fatalf("all done: full %v, flow told %d times; want freed and told to drain", p.full, told)
	}
	out = out[:0]
	cuts := 0
	for {
		recs, _ := p.unstash(3)
		if recs == nil {
			break
		}
		cuts += admit(recs)
	}
	var got []int64
	for _, h := range out {
		got = append(got, h.offset)
	}
	if want := []int64{14, 15, 16, 17, 15, 16}; !slices.Equal(got, want) || cuts != 1 {
		t.Fatalf("handed to lanes %v with %d truncations, want %v with 1", got, cuts, want)
	}
	if p.paused {
		t.Fatal("stash drained, not full: fetch still paused")
	}
	for _, h := range out[len(out)-2:] { // the reused offsets; 14 still holds the watermark
		p.start(h.seq)
		p.finish(h.seq, true)
	}
	if wm := p.tr.Watermark(); wm != 14 {
		t.Fatalf("watermark %d, want 14 (not done)", wm)
	}
	p.start(out[0].seq)
	p.finish(out[0].seq, true)
	if wm := p.tr.Watermark(); wm != 17 {
		t.Fatalf("watermark %d, want 17: one past the reused offsets", wm)
	}
}

// TestFenceDropsStash: a fenced partition forgets its stash (never tracked:
// the next owner reads those records) and holds back every later fetch.
func TestFenceDropsStash(t *testing.T) {
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 2, nil)
	p.admit(recsAt(1, 2), 9, nil, func(int, uint64) {})
	p.hold(recsAt(3, 4), 9)
	p.stopStarting()
	if len(p.stash) != 0 {
		t.Fatalf("fenced with %d stashed", len(p.stash))
	}
	if !p.hold(recsAt(5), 9) || len(p.stash) != 0 {
		t.Fatal("a fenced partition kept a fetch")
	}
	if wm := p.tr.Watermark(); wm != 1 {
		t.Fatalf("watermark %d, want 1: nothing stashed may count", wm)
	}
}
