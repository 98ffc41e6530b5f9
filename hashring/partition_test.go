package hashring

import (
	"errors"
	"testing"
)

// TestJumpPartitionIndependentOfShards: the sessions of one partition, as
// chosen by JumpPartition, spread evenly over the consumer's shards
// (Jump(Sum64)). With the same hash on both sides they would all share
// one shard.
func TestJumpPartitionIndependentOfShards(t *testing.T) {
	const partitions, shards, bound = 12, 8, 1.15
	counts := make([]int, shards)
	for _, k := range randomKeys(200_000, 9) {
		p, err := JumpPartition(k, partitions)
		if err != nil {
			t.Fatal(err)
		}
		if p != 3 {
			continue
		}
		counts[Jump(Sum64(k), shards)]++
	}
	if r := maxOverMean(counts); r > bound {
		t.Fatalf("partition 3's sessions over %d shards: max/mean %.3f > %.2f (%v)", shards, r, bound, counts)
	}
	// The hazard being avoided, shown with the unseeded hash.
	naive := make([]int, shards)
	for _, k := range randomKeys(200_000, 9) {
		if Jump(Sum64(k), partitions) == 3 {
			naive[Jump(Sum64(k), shards)]++
		}
	}
	if r := maxOverMean(naive); r < 2 {
		t.Fatalf("expected the unseeded hash to concentrate partition 3 on few shards, max/mean %.2f", r)
	}
}

func TestJumpPartitionMovement(t *testing.T) {
	keys := randomKeys(100_000, 10)
	moved := 0
	for _, k := range keys {
		a, _ := JumpPartition(k, 12)
		b, _ := JumpPartition(k, 13)
		if a != b {
			moved++
			if b != 12 {
				t.Fatalf("%q moved %d → %d, not to the new partition", k, a, b)
			}
		}
	}
	if f := float64(moved) / float64(len(keys)); f < 0.8/13 || f > 1.2/13 {
		t.Fatalf("moved %.4f, want about 1/13", f)
	}
	if _, err := JumpPartition("k", 0); !errors.Is(err, ErrBadPartitions) {
		t.Fatalf("n=0: %v", err)
	}
}
