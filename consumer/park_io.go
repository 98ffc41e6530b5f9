package consumer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/hashring"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// parkIO writes and reads park partitions: a producer of its own that
// writes each entry to the partition it names, and a short-lived direct
// consumer per rebuild (a group client cannot consume partitions
// directly).
type parkIO struct {
	cfg     *Config
	client  *kgo.Client
	w       parkwire.Writer  // the group's entries, as the park topic carries them
	leaders leaderCache      // of park partitions, for readAt
	fetches atomic.Int64     // fetches readAt made (tests)
	limits  *parkwire.Limits // max.message.bytes of the park topics (internal/parkwire, learned by check)
}

// newParkIO is the park I/O of cfg's group, without a client: what builds
// and names its entries (inspect, release and the topic check need no
// more).
func newParkIO(cfg *Config) *parkIO {
	return &parkIO{cfg: cfg, w: parkwire.Writer{Group: cfg.Group, Suffix: cfg.Park.TopicSuffix},
		limits: &parkwire.Limits{Default: defaultMaxMessageBytes}}
}

// openPark starts the park client. Its batches to each park topic are
// capped at the topic's max.message.bytes, as check learns it before the
// first write to the topic (parkwire.Limits).
func openPark(cfg *Config) (*parkIO, error) {
	io := newParkIO(cfg)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytesFn(io.limits.BatchMax),
		kgo.WithLogger(newKgoLogger(cfg.Logger, "park")),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer: start park client: %w", err)
	}
	io.client = cl
	return io, nil
}

func (io *parkIO) topic(source string) string { return io.w.Topic(source) }

// errParkTopicBad: the park topic is there but unfit (partition count,
// compaction): trying again does not help.
var errParkTopicBad = errors.New("park topic unfit")

// errParkLate: a later owner's fence is in force in the park partition
// (a fence of this group protocol above this owner's generation): this
// member lost the partition while taking it up. Its rebuild is tried
// again with the generation the member is in then (retryRebuild), the
// partition held meanwhile, until franz-go revokes it.
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
			if c.Key == "max.message.bytes" && c.Value != nil { // the limit parked copies must fit (fit)
				io.learnLimit(park, *c.Value)
			}
			if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
				return fmt.Errorf("%w: park topic %s is compacted (cleanup.policy=%s): set cleanup.policy=delete, a compacted park topic loses parked records", errParkTopicBad, park, *c.Value)
			}
		}
	}
	return nil
}

// learnLimit takes park topic's max.message.bytes from its configs (the
// check's DescribeTopicConfigs answer); a value missing or unreadable
// leaves Kafka's default.
func (io *parkIO) learnLimit(topic, value string) {
	if n, err := strconv.Atoi(value); err == nil && n > 0 {
		io.limits.Learn(topic, n)
	}
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

// loggedEntry is an entry of a park partition as read back: where it is,
// when it was written, and what it says.
type loggedEntry struct {
	off   int64
	at    time.Time
	e     parkset.Entry
	level int // a parked copy's placement count (0: none, or a stub)
}

// entries reads the entries of park partition (topic, part) from offset
// from up to to, keeping of each what the parked set needs (a parked
// copy's content is read again when it is retried). A record that is no
// park entry is passed to bad and skipped.
func (io *parkIO) entries(ctx context.Context, topic string, part int32, from, to int64, bad func(*kgo.Record, error)) ([]loggedEntry, error) {
	var out []loggedEntry
	err := io.read(ctx, topic, part, from, to, func(r *kgo.Record) {
		e, _, err := parkwire.Parse(r)
		if err != nil {
			bad(r, err)
			return
		}
		le := loggedEntry{off: r.Offset, at: r.Timestamp, e: e}
		if e.Kind == parkset.KindRecord {
			if pl, err := hashring.ParsePlacement(placementOf(r)); err == nil {
				le.level = pl.Count
			}
		}
		out = append(out, le)
	})
	return out, err
}

// read passes each record of park partition (topic, part) from offset from
// (-1: its start) up to, not including, offset to, in order, to fn: the
// rebuild keeps what it needs of each, not the records.
func (io *parkIO) read(ctx context.Context, topic string, part int32, from, to int64, fn func(*kgo.Record)) error {
	return readRange(ctx, io.cfg, "park-rebuild", topic, part, from, to, fn)
}

// readRange passes each record of partition (topic, part) from offset
// from (-1: its start) up to, not including, offset to, in order, to fn,
// through a reader of its own (what names it in the log).
func readRange(ctx context.Context, cfg *Config, what, topic string, part int32, from, to int64, fn func(*kgo.Record)) error {
	if from >= to || to <= 0 {
		return nil
	}
	at := kgo.NewOffset().AtStart()
	if from >= 0 {
		at = kgo.NewOffset().At(from)
	}
	// Transaction markers are kept, and passed over: one at to-1 (another
	// writer's transaction) is what shows the read reached its end.
	cl, err := newReader(cfg, what, topic, map[int32]kgo.Offset{part: at}, kgo.KeepControlRecords())
	if err != nil {
		return fmt.Errorf("start %s reader: %w", what, err)
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
			if !r.Attrs.IsControl() {
				fn(r)
			}
			reached = reached || r.Offset >= to-1
		})
		if reached {
			return nil
		}
	}
}

// newReader is a client of cfg's brokers that reads topic's partitions
// from the offsets given (from their start where one is out of range),
// outside the group; its log lines say what for. opts come before
// cfg.ClientOptions.
func newReader(cfg *Config, what, topic string, at map[int32]kgo.Offset, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.WithLogger(newKgoLogger(cfg.Logger, what)),
	}, opts...), cfg.ClientOptions...)...)
}

// fit returns park copy cp as it is to be written under its park topic's
// limit (parkwire.Fit), with its size bound and that limit.
func (io *parkIO) fit(cp *kgo.Record) (rec *kgo.Record, stub bool, size, limit int) {
	limit = io.limits.Limit(cp.Topic)
	rec, stub, size = parkwire.Fit(cp, limit)
	return rec, stub, size, limit
}

// leaderCache keeps the leaders readAt found, so that a session draining
// its parked records costs one fetch per record, not a metadata request
// too; an entry is forgotten when a fetch through it fails.
type leaderCache struct {
	mu sync.Mutex
	m  map[topicPart]leaderOf
}

func (c *leaderCache) get(tp topicPart) (leaderOf, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[tp]
	return l, ok
}

// leaderOf is the broker leading a partition and its topic's ID (a fetch
// names topics by ID from version 13).
type leaderOf struct {
	broker  int32
	topicID [16]byte
}

type topicPart struct {
	topic string
	part  int32
}

func (c *leaderCache) put(tp topicPart, l leaderOf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[topicPart]leaderOf{}
	}
	c.m[tp] = l
}

func (c *leaderCache) forget(tp topicPart) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, tp)
}
