package consumer

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
		var prior []offRange
		for o := int64(rng.IntN(5)); o < 60; o += int64(2 + rng.IntN(8)) {
			end := o + int64(rng.IntN(3))
			prior = append(prior, offRange{o, end})
			o = end
		}
		p.prior = skipper{rs: prior}
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
					done = done || (r.start <= off && off <= r.end)
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
