package consumer

import (
	"fmt"
	"math"
	"math/bits"
	"testing"
)

// TestShardOfSpreads: shardOf puts every lane key on one of the shards, and
// spreads sessions over all of them, for any shard count.
func TestShardOfSpreads(t *testing.T) {
	// The scaling itself, at the hashes' extremes: never past the last shard.
	for n := uint64(1); n <= 1024; n++ {
		for _, h := range []uint64{0, 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64} {
			if hi, _ := bits.Mul64(h, n); hi >= n {
				t.Fatalf("hash %#x onto %d shards: shard %d", h, n, hi)
			}
		}
	}
	for _, n := range []int{1, 2, 3, 7, 16, 48, 100, 1000, 1024} {
		c := &Consumer{shards: make([]*shard, n)}
		count := map[*shard]int{}
		for i := range c.shards {
			c.shards[i] = &shard{}
		}
		keys := 200 * n
		for i := range keys {
			s := c.shardOf(fmt.Sprintf("session-%d", i))
			if s == nil {
				t.Fatalf("%d shards: lane key %d has none", n, i)
			}
			count[s]++
		}
		if len(count) != n {
			t.Fatalf("%d shards: %d keys landed on %d of them", n, keys, len(count))
		}
		for _, k := range count {
			if k < 100 || k > 300 { // 200 expected, sd ~14
				t.Errorf("%d shards: a shard got %d of %d keys, want about 200", n, k, keys)
				break
			}
		}
	}
}
