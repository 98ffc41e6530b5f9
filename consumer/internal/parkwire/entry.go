package parkwire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/clip"
	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// Headers of park topic entries
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#topic-layout).
// A parked copy keeps the record's own key, value and headers and adds
// these. They are lanes' own wire format, read only by lanes
// (InspectParked, ReleaseHeld, the lanes CLI), so they stay inside the
// consumer module; parking.md documents them for an operator reading a
// park topic.
const (
	HeaderKind       = "lanes-park-kind"       // record, done, hold, attempt, fence or release
	HeaderSession    = "lanes-park-session"    // the lane (session) it belongs to
	HeaderEpoch      = "lanes-park-epoch"      // park offset of its writer's fence marker
	HeaderGroup      = "lanes-park-group"      // the consumer group that wrote it
	HeaderGeneration = "lanes-park-generation" // fence: the owner's generation (classic) or member epoch (KIP-848)
	HeaderTopicID    = "lanes-park-topic-id"   // fence: the source topic's ID (hex), its incarnation
	HeaderProtocol   = "lanes-park-protocol"   // fence: the group protocol its generation is of: classic or consumer (KIP-848)
	// HeaderGenerationReset marks a fence whose generation starts the
	// comparison again ("true"): the group's generations started again.
	HeaderGenerationReset = "lanes-park-generation-reset"
	HeaderThrough         = "lanes-park-through"       // done/hold: source offsets done through this one; attempt: its head's source offset
	HeaderRetries         = "lanes-park-retries"       // attempt: failed retries of the head so far
	HeaderTopic           = "lanes-park-topic"         // source topic
	HeaderPartition       = "lanes-park-partition"     // source partition
	HeaderOffset          = "lanes-park-offset"        // source offset
	HeaderAttempts        = "lanes-park-attempts"      // failed attempts before it was parked
	HeaderFirstFailure    = "lanes-park-first-failure" // RFC 3339, when its first attempt failed
	HeaderNotBefore       = "lanes-park-not-before"    // RFC 3339, its first retry
	HeaderReason          = "lanes-park-reason"        // why it was parked
	HeaderSource          = "lanes-park-source"        // the source record's timestamp (Unix ns), leader epoch, producer ID and epoch
)

// Prefix begins the name of every header lanes adds to a park entry.
const Prefix = "lanes-park-"

var kindNames = map[parkset.Kind]string{parkset.KindRecord: "record", parkset.KindDone: "done", parkset.KindHold: "hold",
	parkset.KindFence: "fence", parkset.KindAttempt: "attempt", parkset.KindRelease: "release"}

// KindName is kind as the lanes-park-kind header names it.
func KindName(kind parkset.Kind) string { return kindNames[kind] }

// Writer builds the park entries of one consumer group.
type Writer struct {
	Group  string // the consumer group whose entries these are
	Suffix string // the park topic of source topic T is T + Suffix
}

// Topic is the park topic of source topic source.
func (w Writer) Topic(source string) string { return source + w.Suffix }

// Copy is the park copy of source record r of lane.
func (w Writer) Copy(r *kgo.Record, lane string, epoch int64, attempts int, first, notBefore time.Time, reason string) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+11)
	h = append(h, r.Headers...)
	h = append(h, w.Meta(parkset.KindRecord, lane, epoch)...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderFirstFailure, Value: []byte(first.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderNotBefore, Value: []byte(notBefore.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(clip.UTF8(reason, clip.MaxError))},
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(fmt.Sprintf("%d %d %d %d",
			r.Timestamp.UnixNano(), r.LeaderEpoch, r.ProducerID, r.ProducerEpoch))},
	)
	return &kgo.Record{Topic: w.Topic(r.Topic), Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: h}
}

// Marker is a done, hold or attempt entry of the park partition of
// source partition (source, part).
func (w Writer) Marker(kind parkset.Kind, source string, part int32, lane string, through, epoch int64) *kgo.Record {
	h := append(w.Meta(kind, lane, epoch), kgo.RecordHeader{Key: HeaderThrough, Value: strconv.AppendInt(nil, through, 10)})
	return &kgo.Record{Topic: w.Topic(source), Partition: part, Key: []byte(lane), Headers: h}
}

// Fence is the fence marker of a new owner of source partition (source,
// part): its generation gen, of group protocol proto, and the source
// topic's ID. A reset fence (its owner's generation was below the one in
// force, of the other protocol: the group's protocol switched, so its
// generations started again) is in force whatever the generation before
// it.
func (w Writer) Fence(source string, part int32, gen int32, proto, topicID string, reset bool) *kgo.Record {
	h := append(w.Meta(parkset.KindFence, "", -1),
		kgo.RecordHeader{Key: HeaderGeneration, Value: strconv.AppendInt(nil, int64(gen), 10)},
		kgo.RecordHeader{Key: HeaderProtocol, Value: []byte(proto)},
		kgo.RecordHeader{Key: HeaderTopicID, Value: []byte(topicID)})
	if reset {
		h = append(h, kgo.RecordHeader{Key: HeaderGenerationReset, Value: []byte("true")})
	}
	return &kgo.Record{Topic: w.Topic(source), Partition: part, Headers: h}
}

// Attempt is the attempt marker of lane's head at source offset src,
// after its retries-th failed retry.
func (w Writer) Attempt(source string, part int32, lane string, src, epoch int64, retries int) *kgo.Record {
	r := w.Marker(parkset.KindAttempt, source, part, lane, src, epoch)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderRetries, Value: strconv.AppendInt(nil, int64(retries), 10)})
	return r
}

// Meta is the headers every entry of w's group starts with: its kind,
// session, writer's epoch and group.
func (w Writer) Meta(kind parkset.Kind, lane string, epoch int64) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: HeaderKind, Value: []byte(kindNames[kind])},
		{Key: HeaderSession, Value: []byte(lane)},
		{Key: HeaderEpoch, Value: strconv.AppendInt(nil, epoch, 10)},
		{Key: HeaderGroup, Value: []byte(w.Group)},
	}
}

// Parse reads a park partition's record: its entry and, for a parked
// copy, the source record as the handler is to see it (source topic,
// partition and offset; its own headers without lanes-park-*).
func Parse(r *kgo.Record) (parkset.Entry, *kgo.Record, error) {
	var e parkset.Entry
	var kind, topic string
	var part, off, through int64 = -1, -1, -1
	e.Epoch, e.Gen = -1, -1
	src := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, Prefix) {
			src.Headers = append(src.Headers, h)
			continue
		}
		v := string(h.Value)
		switch h.Key {
		case HeaderKind:
			kind = v
		case HeaderSession:
			e.Session = v
		case HeaderEpoch:
			e.Epoch, _ = strconv.ParseInt(v, 10, 64)
		case HeaderGroup:
			e.Group = v
		case HeaderGeneration:
			if g, err := strconv.ParseInt(v, 10, 32); err == nil {
				e.Gen = int32(g)
			}
		case HeaderTopicID:
			e.TopicID = v
		case HeaderProtocol:
			e.Proto = v
		case HeaderGenerationReset:
			e.Reset = v == "true"
		case HeaderThrough:
			through, _ = strconv.ParseInt(v, 10, 64)
		case HeaderRetries:
			e.Retries, _ = strconv.Atoi(v)
		case HeaderTopic:
			topic = v
		case HeaderPartition:
			part, _ = strconv.ParseInt(v, 10, 64)
		case HeaderOffset:
			off, _ = strconv.ParseInt(v, 10, 64)
		case HeaderSource: // the source record as the handler saw it before the copy (absent in older copies)
			var ns int64
			if _, err := fmt.Sscanf(v, "%d %d %d %d", &ns, &src.LeaderEpoch, &src.ProducerID, &src.ProducerEpoch); err == nil {
				src.Timestamp = time.Unix(0, ns)
			}
		}
	}
	switch kind {
	case "record":
		if topic == "" || part < 0 || off < 0 {
			return e, nil, errors.New("parked copy without its source position")
		}
		e.Kind, e.Src = parkset.KindRecord, off
		src.Topic, src.Partition, src.Offset = topic, int32(part), off
		return e, src, nil
	case "done", "hold":
		if through < 0 {
			return e, nil, fmt.Errorf("%s marker without %s", kind, HeaderThrough)
		}
		e.Kind, e.Src = parkset.KindDone, through
		if kind == "hold" {
			e.Kind = parkset.KindHold
		}
		return e, nil, nil
	case "attempt":
		if through < 0 || e.Retries <= 0 {
			return e, nil, fmt.Errorf("attempt marker without %s or %s", HeaderThrough, HeaderRetries)
		}
		e.Kind, e.Src = parkset.KindAttempt, through
		return e, nil, nil
	case "fence":
		e.Kind = parkset.KindFence
		return e, nil, nil
	case "release":
		if e.Session == "" {
			return e, nil, fmt.Errorf("release marker without %s", HeaderSession)
		}
		e.Kind = parkset.KindRelease
		return e, nil, nil
	}
	return e, nil, fmt.Errorf("not a lanes park entry (%s %q)", HeaderKind, kind)
}

// IsCopy reports whether park partition record r is a parked copy.
func IsCopy(r *kgo.Record) bool {
	return string(Value(r, HeaderKind)) == kindNames[parkset.KindRecord]
}

// Value is the value of r's header k; nil without one.
func Value(r *kgo.Record, k string) []byte {
	for _, h := range r.Headers {
		if h.Key == k {
			return h.Value
		}
	}
	return nil
}

// HeaderStub marks a stub: a parked copy of a record too large for its
// park topic, with the record's key and the lanes-park-* provenance but
// neither its value nor its own headers. Its retry reads the record from
// its source partition at its source offset.
const HeaderStub = "lanes-park-stub"

// StubOf is the stub of park copy cp: its key and lanes-park-* headers,
// marked with HeaderStub.
func StubOf(cp *kgo.Record) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 16)
	for _, x := range cp.Headers {
		if strings.HasPrefix(x.Key, Prefix) {
			h = append(h, x)
		}
	}
	h = append(h, kgo.RecordHeader{Key: HeaderStub, Value: []byte("1")})
	return &kgo.Record{Topic: cp.Topic, Partition: cp.Partition, Key: cp.Key, Headers: h}
}

// IsStub reports whether park entry r is a stub.
func IsStub(r *kgo.Record) bool { return string(Value(r, HeaderStub)) == "1" }

// StubFor returns the stub to write instead of park copy rec, whose write
// failed with err, when err says it is too large (franz-go's own check, or
// the broker's: a park topic whose limit was lowered after the client took
// it); nil otherwise.
func StubFor(rec *kgo.Record, err error) *kgo.Record {
	if !errors.Is(err, kerr.MessageTooLarge) || string(Value(rec, HeaderKind)) != "record" || IsStub(rec) {
		return nil
	}
	return StubOf(rec)
}

// Attempts is the number of failed attempts park entry r's record had
// in its lane before it was parked (0 for one forwarded behind its parked
// session, or when r does not say).
func Attempts(r *kgo.Record) int {
	n, err := strconv.Atoi(string(Value(r, HeaderAttempts)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
