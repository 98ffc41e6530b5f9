package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Park copies of large records
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#limits). The
// park client caps each park topic's batches at that topic's
// max.message.bytes, which the check at assignment reads (parkLimits); a
// copy is built to fit it: its lanes-park-reason is cut when that is
// enough, and a copy that still does not fit is parked as a stub, read back
// from its source partition when it is retried.

// headerParkStub marks a stub: a parked copy of a record too large for its
// park topic, with the record's key and the lanes-park-* provenance but
// neither its value nor its own headers. Its retry reads the record from
// its source partition at its source offset.
const headerParkStub = "lanes-park-stub"

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

// encodedSize bounds from above the size of a record batch holding r alone.
func encodedSize(r *kgo.Record) int {
	n := parkBatchOverhead + parkRecordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += parkHeaderOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// parkLimits knows the max.message.bytes of each park topic. franz-go takes
// a topic's batch limit (batchMax) once, when it first sees the topic's
// partitions, and keeps it; the check reads the topic's limit before the
// first write to it (the fence of the rebuild), so the two agree. A limit
// raised later is used from the next start; one lowered later is used at
// once for the copies built (a batch of several copies may still exceed
// it: its writes fail as too large and their copies are parked as stubs).
type parkLimits struct {
	mu      sync.Mutex
	learned map[string]int // park topic → its max.message.bytes, as last checked
	taken   map[string]int // park topic → the smallest batch limit the client took for it
}

// learn records park topic's max.message.bytes.
func (l *parkLimits) learn(topic string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.learned == nil {
		l.learned = map[string]int{}
	}
	l.learned[topic] = n
}

// batchMax is the park client's batch limit for topic
// (kgo.ProducerBatchMaxBytesFn): its max.message.bytes when known, else
// Kafka's default, within what franz-go allows.
func (l *parkLimits) batchMax(topic string) int32 {
	if topic == "" { // franz-go's check of the option at the client's creation
		return defaultMaxMessageBytes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := defaultMaxMessageBytes
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

// limit is the size a batch holding one copy for topic may have: the
// smaller of its max.message.bytes (Kafka's default when unknown) and the
// batch limit the park client took for it.
func (l *parkLimits) limit(topic string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := defaultMaxMessageBytes
	if v, ok := l.learned[topic]; ok {
		n = v
	}
	if v, ok := l.taken[topic]; ok {
		n = min(n, v)
	}
	return n
}

// learnLimit takes park topic's max.message.bytes from its configs (the
// check's DescribeTopicConfigs answer); a value missing or unreadable
// leaves Kafka's default.
func (io *parkIO) learnLimit(topic, value string) {
	if n, err := strconv.Atoi(value); err == nil && n > 0 {
		io.limits.learn(topic, n)
	}
}

// fit returns park copy cp as it is to be written: whole when it fits its
// park topic's limit, its lanes-park-reason cut when that makes it fit,
// else its stub (stub true). size is cp's encoded size bound, limit the
// topic's.
func (io *parkIO) fit(cp *kgo.Record) (rec *kgo.Record, stub bool, size, limit int) {
	limit = io.limits.limit(cp.Topic)
	size = encodedSize(cp)
	if size <= limit {
		return cp, false, size, limit
	}
	for i, h := range cp.Headers {
		if h.Key == headerParkReason && size-limit <= len(h.Value) {
			cut := *cp
			cut.Headers = append([]kgo.RecordHeader(nil), cp.Headers...)
			cut.Headers[i].Value = []byte(clipUTF8(string(h.Value), len(h.Value)-(size-limit)))
			return &cut, false, size, limit
		}
	}
	return stubOf(cp), true, size, limit
}

// stubOf is the stub of park copy cp: its key and lanes-park-* headers,
// marked with headerParkStub.
func stubOf(cp *kgo.Record) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 16)
	for _, x := range cp.Headers {
		if strings.HasPrefix(x.Key, "lanes-park-") {
			h = append(h, x)
		}
	}
	h = append(h, kgo.RecordHeader{Key: headerParkStub, Value: []byte("1")})
	return &kgo.Record{Topic: cp.Topic, Partition: cp.Partition, Key: cp.Key, Headers: h}
}

// isStub reports whether park entry r is a stub.
func isStub(r *kgo.Record) bool { return string(headerValue(r, headerParkStub)) == "1" }

// stubFor returns the stub to write instead of park copy rec, whose write
// failed with err, when err says it is too large (franz-go's own check, or
// the broker's: a park topic whose limit was lowered after the client took
// it); nil otherwise.
func stubFor(rec *kgo.Record, err error) *kgo.Record {
	if !errors.Is(err, kerr.MessageTooLarge) || string(headerValue(rec, headerParkKind)) != "record" || isStub(rec) {
		return nil
	}
	return stubOf(rec)
}

// logStub warns that park copy cp is written as a stub.
func (c *Consumer) logStub(cp *kgo.Record, size, limit int, cause error) {
	ev := c.log().Warn().Str("topic", string(headerValue(cp, headerParkTopic))).
		Str("partition", string(headerValue(cp, headerParkPartition))).Str("offset", string(headerValue(cp, headerParkOffset))).
		Str("session", string(headerValue(cp, headerParkSession))).Str("park_topic", cp.Topic)
	if cause != nil {
		ev = ev.AnErr("cause", cause)
	} else {
		ev = ev.Int("copy_bytes", size).Int("park_max_message_bytes", limit)
	}
	ev.Msg("park: record too large for its park topic: parked as a stub (its key and provenance, without its value and headers); its retry reads it from its source partition, so keep the source topic's retention longer than the park delays plus an outage, or raise the park topic's max.message.bytes to park such records whole")
}

// parkedAttempts is the number of failed attempts park entry r's record had
// in its lane before it was parked (0 for one forwarded behind its parked
// session, or when r does not say).
func parkedAttempts(r *kgo.Record) int {
	n, err := strconv.Atoi(string(headerValue(r, headerParkAttempts)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// readStub reads the record whose stub is parked head h (stub as parsed)
// from its source partition. A record gone from it, or another record at
// its offset (the source topic made again), is errRecordGone: its loss is
// dead-lettered (parkLost).
func (c *Consumer) readStub(ctx context.Context, p *partition, h parkset.Record, stub *kgo.Record) (*kgo.Record, error) {
	r, _, err := c.park.readAt(ctx, p.key.topic, p.key.partition, h.SrcOffset)
	if err != nil {
		return nil, fmt.Errorf("parked stub (park offset %d): read its record from %s/%d at %d: %w",
			h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset, err)
	}
	if !bytes.Equal(r.Key, stub.Key) {
		return nil, fmt.Errorf("%w: parked stub (park offset %d): %s/%d at %d holds a record of another key than the stub's: the topic was made again",
			errRecordGone, h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset)
	}
	return r, nil
}
