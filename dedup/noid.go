package dedup

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"strconv"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
)

// NoEventIDPolicy says what the middleware (and pgdedup's TxHandler) does
// with a message that has no key: Config.Key, by default [EventKey],
// returned "". Such a record was not produced by lanes' producer (which
// stamps the lanes-event-id header on every record), or Config.Key does not
// know it. Kafka reuses offsets (a topic deleted and created again, a log
// truncated), so a record's place alone does not name an event: a done mark
// of an old record would skip a new one. The zero value refuses.
type NoEventIDPolicy int

const (
	// RefuseNoEventID, the default, fails the attempt with a permanent
	// error wrapping [ErrNoEventID] that names the record's topic,
	// partition and offset and what to do: the consumer sends it to the
	// dead-letter topic at its first attempt, where it waits for a fix
	// and a replay. The handler does not run. Counted in Stats.Refused.
	RefuseNoEventID NoEventIDPolicy = iota
	// RunWithoutDedup runs the handler with no claim and no done mark:
	// its effects are applied at least once, and every redelivery of the
	// record repeats them. Counted in Stats.RanWithoutDedup.
	RunWithoutDedup
	// KeyByPosition keys the message by [PositionKey]: the record's place
	// and what it carried, so that a redelivery of the same record is
	// skipped and a different record at a reused offset is not. A copy of
	// an event re-sent at another offset is not caught. Counted in
	// Stats.KeyedByPosition (and in Ran or Skipped).
	KeyByPosition
)

func (p NoEventIDPolicy) String() string {
	switch p {
	case RefuseNoEventID:
		return "refuse"
	case RunWithoutDedup:
		return "run without dedup"
	case KeyByPosition:
		return "key by position"
	}
	return "unknown (" + strconv.Itoa(int(p)) + ")"
}

// Valid reports whether p is one of the policies above.
func (p NoEventIDPolicy) Valid() bool { return p >= RefuseNoEventID && p <= KeyByPosition }

// Key applies p to m, a message that has no key: it returns PositionKey(m)
// for KeyByPosition, "" (run without dedup) for RunWithoutDedup, and for
// RefuseNoEventID (or an unknown policy) a consumer.Permanent error
// wrapping ErrNoEventID.
func (p NoEventIDPolicy) Key(m *consumer.Message) (string, error) {
	switch p {
	case RunWithoutDedup:
		return "", nil
	case KeyByPosition:
		return PositionKey(m), nil
	}
	r := m.Record
	return "", consumer.Permanent(fmt.Errorf("%w: topic %s partition %d offset %d: produce it with lanes' producer "+
		"(which sets the %s header), or set the dedup config's Key to name its event, or its NoEventID to "+
		"RunWithoutDedup or KeyByPosition (https://github.com/lanesdev/lanes/blob/main/docs/dedup.md); then replay it from the dead-letter topic",
		ErrNoEventID, r.Topic, r.Partition, r.Offset, eventid.HeaderEventID))
}

// PositionKey is the key of a record by its position, for messages without
// an event ID ([KeyByPosition]): its topic, partition and offset, and what
// tells two records at one offset apart: the leader epoch and the producer
// ID and epoch of its batch, its timestamp (milliseconds), and a SHA-256
// digest of its key, value and headers. A redelivery of the record has the
// same key: every part is stored with the record and read back as it is.
//
// A new record at a reused offset differs in at least one part unless it is
// a byte-identical copy of the old one, written with the same millisecond
// timestamp and the same producer ID and epoch (a producer that is not
// idempotent writes -1 and 0), under the same leader epoch. A truncated
// log's new records are written by a newer leader (a higher epoch), and a
// re-created topic's by a later clock; the remaining case is a copy of the
// old topic written back with its original timestamps (a mirror, a replay
// tool) into a topic re-created at the same leader epoch: that is the same
// event, already applied, and it is skipped.
func PositionKey(m *consumer.Message) string {
	r := m.Record
	h := sha256.New()
	field(h, r.Key)
	field(h, r.Value)
	for _, hd := range r.Headers {
		field(h, []byte(hd.Key))
		field(h, hd.Value)
	}
	return fmt.Sprintf("lanes-position:%s/%d@%d:epoch=%d:ts=%d:producer=%d.%d:sha256=%x",
		r.Topic, r.Partition, r.Offset, r.LeaderEpoch, r.Timestamp.UnixMilli(), r.ProducerID, r.ProducerEpoch,
		h.Sum(nil)[:16])
}

// field writes b to h with its length first (-1 for nil), so that no two
// lists of fields hash the same bytes.
func field(h hash.Hash, b []byte) {
	n := int64(len(b))
	if b == nil {
		n = -1
	}
	_ = binary.Write(h, binary.BigEndian, n)
	h.Write(b)
}
