package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parkFetchBytes is what one read of a parked copy asks the broker for:
// the batch holding the copy (a broker returns the first batch of a fetch
// whatever its size, KIP-74) and what follows it up to this size, for the
// read-ahead (internal/parkahead). Small, so that a retry whose followers are
// of no use fetches and decodes little.
const parkFetchBytes = 64 << 10

// errRecordGone: the record asked for is no longer in its partition
// (deleted by retention, or by an operator's DeleteRecords).
var errRecordGone = errors.New("record no longer in its partition")

// readAt reads the record at offset off of partition (topic, part): a
// parked copy, read back from its park partition when its retry is due
// (the parked set keeps offsets, not records), or its source record when
// the copy is gone. It asks the partition's leader directly with one
// fetch, and returns the records the fetch brought after it too (after, in
// offset order): the next heads of a draining session are among them. An
// error is for the caller to try again later, but errRecordGone (the
// offset is below the partition's log start, or missing from it), which no
// retry mends.
func (io *parkIO) readAt(ctx context.Context, topic string, part int32, off int64) (r *kgo.Record, after []*kgo.Record, err error) {
	tp := topicPart{topic, part}
	l, cached := io.leaders.get(tp)
	for {
		if !cached {
			var err error
			if l, err = io.leaderOf(ctx, topic, part); err != nil {
				return nil, nil, err
			}
			io.leaders.put(tp, l)
		}
		r, after, err = io.fetchAt(ctx, l, topic, part, off)
		if err == nil || errors.Is(err, errRecordGone) {
			return r, after, err
		}
		io.leaders.forget(tp) // moved, or the topic made again: looked up anew
		if !cached || ctx.Err() != nil {
			return nil, nil, err
		}
		cached = false
	}
}

// fetchAt asks leader l for the record at off of (topic, part).
func (io *parkIO) fetchAt(ctx context.Context, l leaderOf, topic string, part int32, off int64) (*kgo.Record, []*kgo.Record, error) {
	leader, id := l.broker, l.topicID
	io.fetches.Add(1)
	req := kmsg.NewPtrFetchRequest()
	req.MinBytes, req.MaxBytes = 1, parkFetchBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, off, parkFetchBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := io.client.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetch %s/%d at %d from broker %d: %w", topic, part, off, leader, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("fetch %s/%d at %d from broker %d: %w", topic, part, off, leader, err)
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Partition != part {
				continue
			}
			r, after, err := pickAt(&t.Partitions[i], topic, part, off)
			if errors.Is(err, kerr.OffsetOutOfRange) {
				err = io.outOfRange(ctx, topic, part, off, err)
			}
			return r, after, err
		}
	}
	return nil, nil, fmt.Errorf("fetch %s/%d at %d from broker %d: the answer has no such partition", topic, part, off, leader)
}

// pickAt decodes a fetched partition and returns its record at off and
// those after it.
func pickAt(rp *kmsg.FetchResponseTopicPartition, topic string, part int32, off int64) (*kgo.Record, []*kgo.Record, error) {
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic, Partition: part},
		rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return nil, nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, part, off, fp.Err)
	}
	for i, r := range fp.Records {
		if r.Offset == off {
			return r, fp.Records[i+1:], nil
		}
		if r.Offset > off {
			return nil, nil, fmt.Errorf("%w: %s/%d has no record at offset %d (the next is %d)", errRecordGone, topic, part, off, r.Offset)
		}
	}
	if next > off { // the batch holding off was read, with no record at it (a control record, or compacted away)
		return nil, nil, fmt.Errorf("%w: %s/%d has no record at offset %d", errRecordGone, topic, part, off)
	}
	return nil, nil, fmt.Errorf("fetch %s/%d at %d: not returned (high watermark %d)", topic, part, off, fp.HighWatermark)
}

// outOfRange tells why a fetch of (topic, part) at off was out of range
// (err): errRecordGone when off is below the partition's log start (the
// record was deleted), else err. The log start is listed: Kafka's answer
// to an out-of-range fetch carries none (log start -1).
func (io *parkIO) outOfRange(ctx context.Context, topic string, part int32, off int64, err error) error {
	starts, lerr := kadm.NewClient(io.client).ListStartOffsets(ctx, topic)
	if lerr == nil {
		lerr = starts.Error()
	}
	start, ok := starts.Lookup(topic, part)
	switch {
	case lerr != nil:
		return fmt.Errorf("%w (and its log start: %w)", err, lerr)
	case !ok || start.Err != nil:
		return fmt.Errorf("%w (and its log start: not listed, %v)", err, start.Err)
	case off < start.Offset:
		return fmt.Errorf("%w: %s/%d offset %d is below the log start %d", errRecordGone, topic, part, off, start.Offset)
	}
	return err
}

// leaderOf looks up the broker leading park partition (topic, part).
func (io *parkIO) leaderOf(ctx context.Context, topic string, part int32) (leaderOf, error) {
	tds, err := kadm.NewClient(io.client).ListTopics(ctx, topic)
	if err != nil {
		return leaderOf{}, fmt.Errorf("find the leader of %s/%d: %w", topic, part, err)
	}
	td := tds[topic]
	if td.Err != nil {
		return leaderOf{}, fmt.Errorf("find the leader of %s/%d: %w", topic, part, td.Err)
	}
	pd, ok := td.Partitions[part]
	switch {
	case !ok:
		return leaderOf{}, fmt.Errorf("find the leader of %s/%d: no such partition", topic, part)
	case pd.Err != nil:
		return leaderOf{}, fmt.Errorf("find the leader of %s/%d: %w", topic, part, pd.Err)
	case pd.Leader < 0:
		return leaderOf{}, fmt.Errorf("find the leader of %s/%d: it has none now", topic, part)
	}
	return leaderOf{pd.Leader, [16]byte(td.ID)}, nil
}
