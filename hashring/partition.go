package hashring

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// partitionSeed makes the partition hash of JumpPartition independent of
// Sum64. The consumer picks shards with Jump(Sum64(session), W); if
// partitions were chosen with Jump over the same hash, every session of
// partition p < W would land on shard p (jump only moves keys into new
// buckets as the count grows), serialising a partition on one shard.
const partitionSeed = 0x6c616e6573706172 // "lanespar"

// PartitionHash is the hash JumpPartition places sessions with: xxhash64 of
// the session with a fixed seed, independent of Sum64.
func PartitionHash(session string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(partitionSeed)
	_, _ = d.WriteString(session)
	return d.Sum64()
}

// JumpPartition is the producer's optional consistent partitioner: the
// partition of session among n with jump consistent hashing. When a topic
// grows from n to n+1 partitions only about 1/(n+1) of the sessions move
// (Kafka's murmur2 modulo moves most of them). It returns an error wrapping
// ErrBadPartitions for n < 1.
func JumpPartition(session string, partitions int) (int, error) {
	if partitions < 1 {
		return 0, fmt.Errorf("%w: got %d", ErrBadPartitions, partitions)
	}
	return Jump(PartitionHash(session), partitions), nil
}
