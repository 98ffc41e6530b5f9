package consumer

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
)

// admit hands out exactly the records a fetch admits, each once and in
// offset order: none the Filter drops, none done before the assignment
// (commit metadata, forgotten when the log is truncated), none of a fenced
// partition; each item is its record's.
func TestAdmitHandsOutExactlyTheAdmitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		dropped := map[int64]bool{}
		c := unstarted(t, func(cfg *Config) { cfg.Filter = func(r *kgo.Record) bool { return !dropped[r.Offset] } })
		p := newPartition(context.Background(), partKey{"t", 0}, 1, 1<<30, nil)
		var prior []offsets.Range
		for o := int64(rng.IntN(5)); o < 60; o += int64(2 + rng.IntN(8)) {
			end := o + int64(rng.IntN(3))
			prior = append(prior, offsets.Range{Start: o, End: end})
			o = end
		}
		p.prior = offsets.NewSkipper(prior)
		fenced := rng.IntN(10) == 0
		p.fenced = fenced
		off := int64(0)
		for fetch := 0; fetch < 4; fetch++ {
			truncate := fetch == 3 && off > 0 && rng.IntN(2) == 0
			if truncate {
				off, prior = off/2, nil // the log truncated: offsets reused, the metadata forgotten
			}
			recs := make([]*kgo.Record, rng.IntN(20))
			var want []*kgo.Record
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "t", Offset: off, Key: []byte{byte('a' + rng.IntN(3))}}
				dropped[off] = rng.IntN(4) == 0
				done := false
				for _, r := range prior {
					done = done || (r.Start <= off && off <= r.End)
				}
				if !fenced && !done && !dropped[off] {
					want = append(want, recs[i])
				}
				off += int64(1 + rng.IntN(2))
			}
			cuts := c.stats.truncations.Load()
			ws := c.admit(p, recs, off)
			if seen := c.stats.truncations.Load() > cuts; seen != (truncate && !fenced && len(recs) > 0) {
				t.Fatalf("round %d fetch %d: truncation seen %v, made %v", round, fetch, seen, truncate)
			}
			if len(ws) != len(want) {
				t.Fatalf("round %d fetch %d: admitted %d records, want %d", round, fetch, len(ws), len(want))
			}
			for i := range ws {
				if ws[i].rec != want[i] || ws[i].p != p || ws[i].session != string(want[i].Key) {
					t.Fatalf("round %d fetch %d: item %d is offset %d (session %q), want offset %d",
						round, fetch, i, ws[i].rec.Offset, ws[i].session, want[i].Offset)
				}
				if i > 0 && ws[i].seq <= ws[i-1].seq {
					t.Fatalf("round %d fetch %d: sequence numbers %d then %d", round, fetch, ws[i-1].seq, ws[i].seq)
				}
			}
		}
	}
}

// TestTruncatedBelowCommit: the group committed 100 with offsets 105..110
// listed as completed; the log was then truncated below 100 (an unclean
// leader election), so the client resets and fetches from 0. The metadata
// describes the old log: none of the new records may be skipped by it.
func TestTruncatedBelowCommit(t *testing.T) {
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 1<<20, nil)
	p.resume(100, []offsets.Range{{Start: 105, End: 110}}, "meta")
	var recs []*kgo.Record
	for o := int64(0); o < 120; o++ {
		recs = append(recs, &kgo.Record{Topic: "t", Offset: o})
	}
	n := 0
	_, prior, cut := p.admit(recs, 120, nil, func(int, uint64) { n++ })
	if prior != 0 || n != 120 || cut != 1 {
		t.Fatalf("%d to lanes, %d skipped as completed before, %d truncations; want 120, 0, 1", n, prior, cut)
	}
	if cp, ok := p.toCommit(4096); !ok || cp.offset != 0 || cp.meta != "" {
		t.Fatalf("commit %+v %v: want offset 0 with no completed offsets", cp, ok)
	}
}
