package consumer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers of park topic entries
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#topic-layout).
// A parked copy keeps the record's own key, value and headers and adds
// these. They are lanes' own wire format, read only by lanes
// (InspectParked, ReleaseHeld, the lanes CLI), so they are not exported;
// parking.md documents them for an operator reading a park topic.
const (
	headerParkKind       = "lanes-park-kind"       // record, done, hold, attempt, fence or release
	headerParkSession    = "lanes-park-session"    // the lane (session) it belongs to
	headerParkEpoch      = "lanes-park-epoch"      // park offset of its writer's fence marker
	headerParkGroup      = "lanes-park-group"      // the consumer group that wrote it
	headerParkGeneration = "lanes-park-generation" // fence: the owner's generation (classic) or member epoch (KIP-848)
	headerParkTopicID    = "lanes-park-topic-id"   // fence: the source topic's ID (hex), its incarnation
	headerParkProtocol   = "lanes-park-protocol"   // fence: the group protocol its generation is of: classic or consumer (KIP-848)
	// headerParkGenerationReset marks a fence whose generation starts the
	// comparison again ("true"): the group's generations started again.
	headerParkGenerationReset = "lanes-park-generation-reset"
	headerParkThrough         = "lanes-park-through"       // done/hold: source offsets done through this one; attempt: its head's source offset
	headerParkRetries         = "lanes-park-retries"       // attempt: failed retries of the head so far
	headerParkTopic           = "lanes-park-topic"         // source topic
	headerParkPartition       = "lanes-park-partition"     // source partition
	headerParkOffset          = "lanes-park-offset"        // source offset
	headerParkAttempts        = "lanes-park-attempts"      // failed attempts before it was parked
	headerParkFirstFailure    = "lanes-park-first-failure" // RFC 3339, when its first attempt failed
	headerParkNotBefore       = "lanes-park-not-before"    // RFC 3339, its first retry
	headerParkReason          = "lanes-park-reason"        // why it was parked
	headerParkSource          = "lanes-park-source"        // the source record's timestamp (Unix ns), leader epoch, producer ID and epoch
)

var parkKindNames = map[parkset.Kind]string{parkset.KindRecord: "record", parkset.KindDone: "done", parkset.KindHold: "hold",
	parkset.KindFence: "fence", parkset.KindAttempt: "attempt", parkset.KindRelease: "release"}

// parkIO writes and reads park partitions: a producer of its own that
// writes each entry to the partition it names, and a short-lived direct
// consumer per rebuild (a group client cannot consume partitions
// directly).
type parkIO struct {
	cfg     *Config
	client  *kgo.Client
	leaders leaderCache  // of park partitions, for readAt
	fetches atomic.Int64 // fetches readAt made (tests)
	limits  parkLimits   // max.message.bytes of the park topics (park_size.go)
}

// openPark starts the park client. Its batches to each park topic are
// capped at the topic's max.message.bytes, as check learns it before the
// first write to the topic (park_size.go).
func openPark(cfg *Config) (*parkIO, error) {
	io := &parkIO{cfg: cfg}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytesFn(io.limits.batchMax),
		kgo.WithLogger(newKgoLogger(cfg.Logger, "park")),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer: start park client: %w", err)
	}
	io.client = cl
	return io, nil
}

func (io *parkIO) topic(source string) string { return source + io.cfg.Park.TopicSuffix }

// errParkTopicBad: the park topic is there but unfit (partition count,
// compaction): trying again does not help.
var errParkTopicBad = errors.New("park topic unfit")

// errParkLate: a later owner's fence is in force in the park partition
// (a fence of this group protocol above this owner's generation): this
// member lost the partition while taking it up. Its rebuild is tried
// again only with a newer generation (retryRebuild), the partition held
// meanwhile, until franz-go revokes it.
var errParkLate = errors.New("park: a later owner's fence is in force: this member lost the partition")

// check verifies the park topic of source: it exists, has the source's
// partition count (park partition p belongs with source partition p), and
// is not compacted (every parked record of a session is needed). It
// returns the IDs of both topics: their incarnations.
func (io *parkIO) check(ctx context.Context, adm *kadm.Client, source string) (topicIDs, error) {
	park := io.topic(source)
	tds, err := adm.ListTopics(ctx, source, park)
	if err != nil {
		return topicIDs{}, fmt.Errorf("describe %s and %s: %w", source, park, err)
	}
	ids := topicIDs{source: idOf(tds[source]), park: idOf(tds[park])}
	return ids, io.checkPark(ctx, adm, source, tds)
}

// topicIDs are the IDs (hex; "" when the broker gave none) of a source
// topic and its park topic: their incarnations. A source topic's owners'
// fences name it; the commit's park section names both.
type topicIDs struct{ source, park string }

func idOf(td kadm.TopicDetail) string {
	if td.Err != nil || td.ID == (kadm.TopicID{}) {
		return ""
	}
	return hex.EncodeToString(td.ID[:])
}

func (io *parkIO) checkPark(ctx context.Context, adm *kadm.Client, source string, tds kadm.TopicDetails) error {
	park := io.topic(source)
	sd, pd := tds[source], tds[park]
	switch {
	case pd.Err != nil || pd.Topic == "":
		return fmt.Errorf("park topic %s: missing (%v): create it with %d partitions, cleanup.policy=delete", park, pd.Err, len(sd.Partitions))
	case sd.Err == nil && len(pd.Partitions) != len(sd.Partitions):
		return fmt.Errorf("%w: park topic %s has %d partitions, %s has %d: they must be equal", errParkTopicBad, park, len(pd.Partitions), source, len(sd.Partitions))
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, park)
	if err != nil {
		return fmt.Errorf("describe the configs of %s: %w", park, err)
	}
	if rc, err := rcs.On(park, nil); err == nil && rc.Err == nil {
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil { // the limit parked copies must fit (park_size.go)
				io.learnLimit(park, *c.Value)
			}
			if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
				return fmt.Errorf("%w: park topic %s is compacted (cleanup.policy=%s): set cleanup.policy=delete, a compacted park topic loses parked records", errParkTopicBad, park, *c.Value)
			}
		}
	}
	return nil
}

// write produces rec and waits for its acknowledgement, returning its park
// offset; like deadLetters.write it writes a copy and returns when ctx ends.
func (io *parkIO) write(ctx context.Context, rec *kgo.Record) (int64, error) {
	r := *rec
	type ack struct {
		off int64
		err error
	}
	done := make(chan ack, 1)
	io.client.Produce(ctx, &r, func(r *kgo.Record, err error) { done <- ack{r.Offset, err} })
	select {
	case a := <-done:
		return a.off, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// copyOf is the park copy of source record r of lane.
func (io *parkIO) copyOf(r *kgo.Record, lane string, epoch int64, attempts int, first, notBefore time.Time, reason string) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+11)
	h = append(h, r.Headers...)
	h = append(h, io.meta(parkset.KindRecord, lane, epoch)...)
	h = append(h,
		kgo.RecordHeader{Key: headerParkTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: headerParkPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: headerParkOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: headerParkAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: headerParkFirstFailure, Value: []byte(first.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: headerParkNotBefore, Value: []byte(notBefore.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: headerParkReason, Value: []byte(clipUTF8(reason, maxErrorHeader))},
		kgo.RecordHeader{Key: headerParkSource, Value: []byte(fmt.Sprintf("%d %d %d %d",
			r.Timestamp.UnixNano(), r.LeaderEpoch, r.ProducerID, r.ProducerEpoch))},
	)
	return &kgo.Record{Topic: io.topic(r.Topic), Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: h}
}

// marker is a done, hold or attempt entry of park partition (topic,
// part).
func (io *parkIO) marker(kind parkset.Kind, source string, part int32, lane string, through, epoch int64) *kgo.Record {
	h := append(io.meta(kind, lane, epoch), kgo.RecordHeader{Key: headerParkThrough, Value: strconv.AppendInt(nil, through, 10)})
	return &kgo.Record{Topic: io.topic(source), Partition: part, Key: []byte(lane), Headers: h}
}

// fence is the fence marker of a new owner of source partition (source,
// part): its generation gen, of group protocol proto, and the source
// topic's ID. A reset fence (its owner's generation was below the one in
// force, of the other protocol: the group's protocol switched, so its
// generations started again) is in force whatever the generation before
// it.
func (io *parkIO) fence(source string, part int32, gen int32, proto, topicID string, reset bool) *kgo.Record {
	h := append(io.meta(parkset.KindFence, "", -1),
		kgo.RecordHeader{Key: headerParkGeneration, Value: strconv.AppendInt(nil, int64(gen), 10)},
		kgo.RecordHeader{Key: headerParkProtocol, Value: []byte(proto)},
		kgo.RecordHeader{Key: headerParkTopicID, Value: []byte(topicID)})
	if reset {
		h = append(h, kgo.RecordHeader{Key: headerParkGenerationReset, Value: []byte("true")})
	}
	return &kgo.Record{Topic: io.topic(source), Partition: part, Headers: h}
}

// attempt is the attempt marker of lane's head at source offset src,
// after its retries-th failed retry.
func (io *parkIO) attempt(source string, part int32, lane string, src, epoch int64, retries int) *kgo.Record {
	r := io.marker(parkset.KindAttempt, source, part, lane, src, epoch)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerParkRetries, Value: strconv.AppendInt(nil, int64(retries), 10)})
	return r
}

func (io *parkIO) meta(kind parkset.Kind, lane string, epoch int64) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: headerParkKind, Value: []byte(parkKindNames[kind])},
		{Key: headerParkSession, Value: []byte(lane)},
		{Key: headerParkEpoch, Value: strconv.AppendInt(nil, epoch, 10)},
		{Key: headerParkGroup, Value: []byte(io.cfg.Group)},
	}
}

// parseEntry reads a park partition's record: its entry and, for a parked
// copy, the source record as the handler is to see it (source topic,
// partition and offset; its own headers without lanes-park-*).
func parseEntry(r *kgo.Record) (parkset.Entry, *kgo.Record, error) {
	var e parkset.Entry
	var kind, topic string
	var part, off, through int64 = -1, -1, -1
	e.Epoch, e.Gen = -1, -1
	src := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "lanes-park-") {
			src.Headers = append(src.Headers, h)
			continue
		}
		v := string(h.Value)
		switch h.Key {
		case headerParkKind:
			kind = v
		case headerParkSession:
			e.Session = v
		case headerParkEpoch:
			e.Epoch, _ = strconv.ParseInt(v, 10, 64)
		case headerParkGroup:
			e.Group = v
		case headerParkGeneration:
			if g, err := strconv.ParseInt(v, 10, 32); err == nil {
				e.Gen = int32(g)
			}
		case headerParkTopicID:
			e.TopicID = v
		case headerParkProtocol:
			e.Proto = v
		case headerParkGenerationReset:
			e.Reset = v == "true"
		case headerParkThrough:
			through, _ = strconv.ParseInt(v, 10, 64)
		case headerParkRetries:
			e.Retries, _ = strconv.Atoi(v)
		case headerParkTopic:
			topic = v
		case headerParkPartition:
			part, _ = strconv.ParseInt(v, 10, 64)
		case headerParkOffset:
			off, _ = strconv.ParseInt(v, 10, 64)
		case headerParkSource: // the source record as the handler saw it before the copy (absent in older copies)
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
			return e, nil, fmt.Errorf("%s marker without %s", kind, headerParkThrough)
		}
		e.Kind, e.Src = parkset.KindDone, through
		if kind == "hold" {
			e.Kind = parkset.KindHold
		}
		return e, nil, nil
	case "attempt":
		if through < 0 || e.Retries <= 0 {
			return e, nil, fmt.Errorf("attempt marker without %s or %s", headerParkThrough, headerParkRetries)
		}
		e.Kind, e.Src = parkset.KindAttempt, through
		return e, nil, nil
	case "fence":
		e.Kind = parkset.KindFence
		return e, nil, nil
	case "release":
		if e.Session == "" {
			return e, nil, fmt.Errorf("release marker without %s", headerParkSession)
		}
		e.Kind = parkset.KindRelease
		return e, nil, nil
	}
	return e, nil, fmt.Errorf("not a lanes park entry (%s %q)", headerParkKind, kind)
}

// loggedEntry is an entry of a park partition as read back: where it is,
// when it was written, and what it says.
type loggedEntry struct {
	off int64
	at  time.Time
	e   parkset.Entry
}

// entries reads the entries of park partition (topic, part) from offset
// from up to to, keeping of each what the parked set needs (a parked
// copy's content is read again when it is retried). A record that is no
// park entry is passed to bad and skipped.
func (io *parkIO) entries(ctx context.Context, topic string, part int32, from, to int64, bad func(*kgo.Record, error)) ([]loggedEntry, error) {
	var out []loggedEntry
	err := io.read(ctx, topic, part, from, to, func(r *kgo.Record) {
		e, _, err := parseEntry(r)
		if err != nil {
			bad(r, err)
			return
		}
		out = append(out, loggedEntry{off: r.Offset, at: r.Timestamp, e: e})
	})
	return out, err
}

// read passes each record of park partition (topic, part) from offset from
// (-1: its start) up to, not including, offset to, in order, to fn: the
// rebuild keeps what it needs of each, not the records.
func (io *parkIO) read(ctx context.Context, topic string, part int32, from, to int64, fn func(*kgo.Record)) error {
	if from >= to || to <= 0 {
		return nil
	}
	at := kgo.NewOffset().AtStart()
	if from >= 0 {
		at = kgo.NewOffset().At(from)
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(io.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: at}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(io.cfg.FetchMaxWait),
		kgo.WithLogger(newKgoLogger(io.cfg.Logger, "park-rebuild")),
	}, io.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("start park reader: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s/%d from %d to %d: %w", topic, part, from, to, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("read %s/%d: %w", topic, part, ferr)
		}
		reached := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to {
				reached = true
				return
			}
			fn(r)
			reached = reached || r.Offset >= to-1
		})
		if reached {
			return nil
		}
	}
}
