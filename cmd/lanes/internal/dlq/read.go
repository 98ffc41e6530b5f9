package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// awaitErr says what a dlq command was waiting for from which brokers when
// err ended it, and what to check when the brokers did not answer in time.
func awaitErr(f dlqFlags, what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("brokers %s did not answer within --timeout %v while %s: check that they are up and reachable (and the --tls/--sasl flags): %w",
			f.brokers, f.timeout, what, err)
	}
	return fmt.Errorf("brokers %s, %s: %w (check --brokers and that they are up)", f.brokers, what, err)
}

// missingTopics returns the topics of want that do not exist on the brokers.
func missingTopics(ctx context.Context, adm *kadm.Client, want ...string) ([]string, error) {
	td, err := adm.ListTopics(ctx, want...)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, t := range want {
		d, ok := td[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		} else if d.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", t, d.Err)
		}
	}
	return missing, nil
}

// readDLQ reads the dead-letter topic from its start to the end offsets
// seen at the start, within --timeout. It reads committed records only: a
// consumer with Config.Transactions writes its dead-letter copies inside
// its transactions, so the topic holds commit and abort markers and the
// copies of aborted transactions, which are not dead letters. The end of a
// partition is its last stable offset (the high watermark, or the first
// offset of a transaction still open); the record before it may be a
// marker, which franz-go hands back only when asked (KeepControlRecords),
// so the markers are read too and left out of what readDLQ returns.
func readDLQ(ctx context.Context, f dlqFlags, opts []kgo.Opt) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(f.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("brokers %s: %w", f.brokers, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	missing, err := missingTopics(ctx, adm, f.topic)
	if err != nil {
		return nil, awaitErr(f, "looking up topic "+f.topic, err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("--topic %s: no such topic on brokers %s", f.topic, f.brokers)
	}
	starts, err := adm.ListStartOffsets(ctx, f.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, awaitErr(f, "listing the start offsets of "+f.topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, f.topic) // the last stable offsets
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, awaitErr(f, "listing the end offsets of "+f.topic, err)
	}
	want := map[int32]*readTo{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			want[o.Partition] = &readTo{end: o.Offset, next: s.Offset}
		}
	})
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, awaitErr(f, fmt.Sprintf("reading %s (%s read; %s not yet read to the end: %s)", f.topic,
				cli.Count(len(out), "record"), cli.Count(len(want), "partition"), unread(want)), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			to, ok := want[r.Partition]
			if !ok {
				return
			}
			if r.Offset < to.end {
				to.next = r.Offset + 1
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
			}
			if r.Offset >= to.end-1 { // a marker, or a record past the end: read to the end
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}

// readTo is how far readDLQ has read a partition: next is the offset after
// the last record read (its start offset before any), end its end.
type readTo struct{ end, next int64 }

// unread says how far each partition not yet read to its end got, in
// partition order, the first few: "partition 0 at offset 3 (end 5)".
func unread(want map[int32]*readTo) string {
	const most = 8
	parts := slices.Sorted(maps.Keys(want))
	var says []string
	for i, p := range parts {
		if i == most {
			says = append(says, fmt.Sprintf("and %d more", len(parts)-most))
			break
		}
		says = append(says, fmt.Sprintf("partition %d at offset %d (end %d)", p, want[p].next, want[p].end))
	}
	return strings.Join(says, ", ")
}

// CountByReason reads the dead-letter topic topic from its start to the
// end it has now (within timeout) and counts its records by
// lanes-dlq-reason ("" for none): what lanes console shows.
func CountByReason(ctx context.Context, brokers []string, topic string, opts []kgo.Opt, timeout time.Duration) (map[string]int, int, error) {
	f := dlqFlags{brokers: strings.Join(brokers, ","), topic: topic, timeout: timeout}
	recs, err := readDLQ(ctx, f, append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...))
	if err != nil {
		return nil, 0, err
	}
	counts := map[string]int{}
	for _, r := range recs {
		why, _ := eventid.Header(r, consumer.HeaderDLQReason)
		counts[why]++
	}
	return counts, len(recs), nil
}
