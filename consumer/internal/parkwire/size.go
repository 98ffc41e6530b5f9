package parkwire

import (
	"sync"

	"github.com/lanesdev/lanes/consumer/internal/clip"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Park copies of large records
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#limits). The
// park client caps each park topic's batches at that topic's
// max.message.bytes, which the consumer's check at assignment reads
// (Limits); a copy is built to fit it (Fit): its lanes-park-reason is cut
// when that is enough, and a copy that still does not fit is parked as a
// stub, read back from its source partition when it is retried.

// A conservative bound of what a record batch holding one record adds to
// the record's key, value and headers, as a broker measures it against
// max.message.bytes and franz-go against its batch limit: the v2 batch
// header (61 bytes) and franz-go's length prefix of it in a produce
// request (4); for the record, each varint at its longest (length,
// timestamp delta, offset delta, key and value lengths, header count) and
// its attributes; for each header, its two lengths.
const (
	parkBatchOverhead  = 61 + 4
	parkRecordOverhead = 5 + 1 + 10 + 5 + 5 + 5 + 5
	parkHeaderOverhead = 5 + 5
)

// EncodedSize bounds from above the size of a record batch holding r alone.
func EncodedSize(r *kgo.Record) int {
	n := parkBatchOverhead + parkRecordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += parkHeaderOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// Limits knows the max.message.bytes of each park topic. franz-go takes
// a topic's batch limit (batchMax) once, when it first sees the topic's
// partitions, and keeps it; the check reads the topic's limit before the
// first write to it (the fence of the rebuild), so the two agree. A limit
// raised later is used from the next start; one lowered later is used at
// once for the copies built (a batch of several copies may still exceed
// it: its writes fail as too large and their copies are parked as stubs).
type Limits struct {
	// Default is the limit of a topic whose max.message.bytes is not
	// known: the broker's default.
	Default int

	mu      sync.Mutex
	learned map[string]int // park topic → its max.message.bytes, as last checked
	taken   map[string]int // park topic → the smallest batch limit the client took for it
}

// Learn records park topic's max.message.bytes.
func (l *Limits) Learn(topic string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.learned == nil {
		l.learned = map[string]int{}
	}
	l.learned[topic] = n
}

// BatchMax is the park client's batch limit for topic
// (kgo.ProducerBatchMaxBytesFn): its max.message.bytes when known, else
// Default, within what franz-go allows.
func (l *Limits) BatchMax(topic string) int32 {
	if topic == "" { // franz-go's check of the option at the client's creation
		return int32(l.Default)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.Default
	if v, ok := l.learned[topic]; ok {
		n = v
	}
	n = min(max(n, 512), 1<<30)
	if l.taken == nil {
		l.taken = map[string]int{}
	}
	if v, ok := l.taken[topic]; !ok || n < v {
		l.taken[topic] = n
	}
	return int32(n)
}

// Limit is the size a batch holding one copy for topic may have: the
// smaller of its max.message.bytes (Kafka's default when unknown) and the
// batch limit the park client took for it.
func (l *Limits) Limit(topic string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.Default
	if v, ok := l.learned[topic]; ok {
		n = v
	}
	if v, ok := l.taken[topic]; ok {
		n = min(n, v)
	}
	return n
}

// Fit returns park copy cp as it is to be written under limit (its park
// topic's, Limits.Limit): whole when it fits, its lanes-park-reason cut
// when that makes it fit, else its stub (stub true). size is cp's encoded
// size bound.
func Fit(cp *kgo.Record, limit int) (rec *kgo.Record, stub bool, size int) {
	size = EncodedSize(cp)
	if size <= limit {
		return cp, false, size
	}
	for i, h := range cp.Headers {
		if h.Key == HeaderReason && size-limit <= len(h.Value) {
			cut := *cp
			cut.Headers = append([]kgo.RecordHeader(nil), cp.Headers...)
			cut.Headers[i].Value = []byte(clip.UTF8(string(h.Value), len(h.Value)-(size-limit)))
			return &cut, false, size
		}
	}
	return StubOf(cp), true, size
}
