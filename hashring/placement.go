package hashring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HeaderPlacement is the record header in which lanes' producer stamps how
// it placed a keyed record: the scheme and the partition count it hashed
// over, as [Placement.String] writes them ("kafka/8", "jump/8"). A consumer
// reads it to tell which partition the record's key had before the topic's
// partition count changed (docs/operations.md, "Adding partitions to a
// live topic").
const HeaderPlacement = "lanes-placement"

// Scheme is a way of placing a key on a partition.
type Scheme uint8

const (
	// SchemeKafka is Apache Kafka's default partitioner ([KafkaPartition]).
	SchemeKafka Scheme = iota + 1
	// SchemeJump is jump consistent hashing ([JumpPartition]).
	SchemeJump
)

// ErrBadPlacement is returned by [ParsePlacement] for a header value that
// is not a placement.
var ErrBadPlacement = errors.New("hashring: bad placement")

// Placement is how a keyed record was placed: its scheme and the partition
// count the scheme hashed over.
type Placement struct {
	Scheme Scheme
	Count  int
}

// String is the header value: "kafka/8", "jump/8".
func (p Placement) String() string {
	name := "kafka"
	if p.Scheme == SchemeJump {
		name = "jump"
	}
	return name + "/" + strconv.Itoa(p.Count)
}

// ParsePlacement reads a [HeaderPlacement] value.
func ParsePlacement(v []byte) (Placement, error) {
	name, n, ok := strings.Cut(string(v), "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		return Placement{}, fmt.Errorf("%w: %q", ErrBadPlacement, v)
	}
	switch name {
	case "kafka":
		return Placement{SchemeKafka, count}, nil
	case "jump":
		return Placement{SchemeJump, count}, nil
	}
	return Placement{}, fmt.Errorf("%w: unknown scheme in %q", ErrBadPlacement, v)
}

// Partition is the partition key has under p's scheme with count
// partitions (p's own Count is not used: the caller asks where the key
// was, or will be, under another count).
func (p Placement) Partition(key []byte, count int) (int, error) {
	if p.Scheme == SchemeJump {
		return JumpPartition(string(key), count)
	}
	return KafkaPartition(key, count)
}
