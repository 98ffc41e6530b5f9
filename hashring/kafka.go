package hashring

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBadPartitions is returned by [KafkaPartition] for a partition count
// below one.
var ErrBadPartitions = errors.New("hashring: partition count must be at least 1")

// kafkaPartitioner is franz-go's sticky-key partitioner with its default
// hasher: murmur2, high bit masked, modulo the partition count, exactly as
// Kafka's Java client does for keyed records. It keeps no state for keyed
// records, so one instance serves every caller.
var kafkaPartitioner = kgo.StickyKeyPartitioner(nil).ForTopic("")

// KafkaPartition returns the partition Apache Kafka's default partitioner
// (and franz-go's kgo.StickyKeyPartitioner(nil)) chooses for key:
// (murmur2(key) & 0x7fffffff) % partitions. A nil key is treated as empty.
// librdkafka (CRC32 by default) and Sarama (FNV-1a) disagree with it unless
// configured to match.
func KafkaPartition(key []byte, partitions int) (int, error) {
	if partitions < 1 {
		return 0, fmt.Errorf("%w: got %d", ErrBadPartitions, partitions)
	}
	if key == nil {
		key = []byte{}
	}
	return kafkaPartitioner.Partition(&kgo.Record{Key: key}, partitions), nil
}
