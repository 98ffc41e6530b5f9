package parkahead

import (
	"sync"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// MaxBytes bounds what one ReadAhead holds: a partition's.
const MaxBytes = 1 << 20

// ReadAhead keeps the parked copies that a read of a parked head brought
// along (the consumer's park client fetches some 64 KiB from the head on),
// by park offset, at most MaxBytes of them; it goes with its partition.
// The zero value is empty and ready; it is safe for concurrent use.
type ReadAhead struct {
	mu    sync.Mutex
	recs  map[int64]*kgo.Record // by park offset
	bytes int
}

// Take returns and forgets the copy at park offset off, if kept.
func (ra *ReadAhead) Take(off int64) *kgo.Record {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	r := ra.recs[off]
	if r != nil {
		delete(ra.recs, off)
		ra.bytes -= recordBytes(r)
	}
	return r
}

// Keep adds the parked copies among rs (markers are not retried), making
// room by forgetting what it held when they would not fit. It keeps copies
// of its own: a record decoded from a fetch points into the fetch's
// memory (the whole response, for uncompressed batches, and its batch's
// records), which one small record kept as it is would hold for as long
// as it stays, out of the bound's sight.
func (ra *ReadAhead) Keep(rs []*kgo.Record) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for _, r := range rs {
		if !parkwire.IsCopy(r) || ra.recs[r.Offset] != nil {
			continue
		}
		n := recordBytes(r)
		if n > MaxBytes {
			continue
		}
		if ra.bytes+n > MaxBytes {
			clear(ra.recs)
			ra.bytes = 0
		}
		if ra.recs == nil {
			ra.recs = map[int64]*kgo.Record{}
		}
		ra.recs[r.Offset] = ownCopy(r)
		ra.bytes += n
	}
}

// recordBytes is what a kept record holds: its contents, the record and
// its headers.
func recordBytes(r *kgo.Record) int {
	n := int(unsafe.Sizeof(kgo.Record{})) + len(r.Key) + len(r.Value) + len(r.Headers)*int(unsafe.Sizeof(kgo.RecordHeader{}))
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// ownCopy is r with its key, value and header values in memory of its own
// (one allocation for their bytes): what the read-ahead needs of a parked copy
// (parkwire.Parse), without the fetch it came from.
func ownCopy(r *kgo.Record) *kgo.Record {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	bytes := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Attrs: r.Attrs, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, LeaderEpoch: r.LeaderEpoch,
		Key: bytes(r.Key), Value: bytes(r.Value), Headers: make([]kgo.RecordHeader, len(r.Headers))}
	for i, h := range r.Headers {
		c.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: bytes(h.Value)} // a key is a string of its own (kbin copies it)
	}
	return c
}

// Bytes is what ra holds now, as counted against MaxBytes.
func (ra *ReadAhead) Bytes() int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.bytes
}
