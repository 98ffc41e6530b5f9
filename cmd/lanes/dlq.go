package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/lanesdev/lanes/lanestest"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const dlqUsage = `Usage:
  lanes dlq inspect --brokers host:port --topic DLQ [--limit N]
  lanes dlq replay  --brokers host:port --topic DLQ [--to TOPIC] [--reason R] [--dry-run]

inspect lists the dead-lettered records with where they came from and why.
replay sends them back to their source topic (or --to), same key, value and
headers (so the same event ID) minus the lanes-dlq-* headers; with --reason
only records dead-lettered for that reason. The DLQ is read up to its end at
the start, so replaying never loops.
`

// runDLQ inspects or replays a dead-letter topic.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "inspect" && args[0] != "replay") {
		fmt.Fprint(stderr, dlqUsage)
		return errors.New("dlq: want inspect or replay")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("dlq "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated brokers (required)")
	topic := fs.String("topic", "", "the dead-letter topic (required)")
	limit := fs.Int("limit", 0, "inspect: print at most this many records (0: all)")
	to := fs.String("to", "", "replay: send to this topic instead of each record's source topic")
	reason := fs.String("reason", "", "replay: only records with this lanes-dlq-reason")
	dry := fs.Bool("dry-run", false, "replay: print what would be sent, send nothing")
	var sec security
	sec.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *brokers == "" || *topic == "" {
		return errors.New("dlq: --brokers and --topic are required")
	}
	opts, err := sec.clientOpts(true)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	broker := lanestest.ConnectBroker(strings.Split(*brokers, ","), opts...)
	recs, err := readAll(ctx, broker, *topic)
	if err != nil {
		return fmt.Errorf("dlq: read %s: %w", *topic, err)
	}
	if cmd == "inspect" {
		inspect(stdout, recs, *limit)
		return nil
	}
	return replay(ctx, stdout, broker, recs, *to, *reason, *dry)
}

// readAll reads topic from its start to the end offsets seen at the start.
func readAll(ctx context.Context, broker *lanestest.Broker, topic string) ([]*kgo.Record, error) {
	cl, err := broker.Client(kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			want[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				if r.Offset == end-1 {
					delete(want, r.Partition)
				}
			}
		})
	}
	return out, nil
}

func inspect(w io.Writer, recs []*kgo.Record, limit int) {
	byReason := map[string]int{}
	for i, r := range recs {
		h := func(k string) string { v, _ := eventid.Header(r, k); return v }
		byReason[h(consumer.HeaderDLQReason)]++
		if limit > 0 && i >= limit {
			continue
		}
		fmt.Fprintf(w, "%d/%d key=%q reason=%s from=%s/%s@%s attempts=%s event=%s\n  error: %s\n",
			r.Partition, r.Offset, r.Key, h(consumer.HeaderDLQReason), h(consumer.HeaderDLQTopic),
			h(consumer.HeaderDLQPartition), h(consumer.HeaderDLQOffset), h(consumer.HeaderDLQAttempts),
			eventid.FromRecord(r), h(consumer.HeaderDLQError))
	}
	reasons := make([]string, 0, len(byReason))
	for k := range byReason {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	fmt.Fprintf(w, "%d records", len(recs))
	for _, k := range reasons {
		fmt.Fprintf(w, "; %s: %d", k, byReason[k])
	}
	fmt.Fprintln(w)
}

// dlqHeaders are the headers the consumer adds to a dead-lettered record;
// replay removes them.
var dlqHeaders = map[string]bool{
	consumer.HeaderDLQTopic: true, consumer.HeaderDLQPartition: true, consumer.HeaderDLQOffset: true,
	consumer.HeaderDLQError: true, consumer.HeaderDLQAttempts: true, consumer.HeaderDLQReason: true,
}

func replay(ctx context.Context, w io.Writer, broker *lanestest.Broker, recs []*kgo.Record, to, reason string, dry bool) error {
	var out []*kgo.Record
	for _, r := range recs {
		why, _ := eventid.Header(r, consumer.HeaderDLQReason)
		if reason != "" && why != reason {
			continue
		}
		dest := to
		if dest == "" {
			dest, _ = eventid.Header(r, consumer.HeaderDLQTopic)
		}
		if dest == "" {
			return fmt.Errorf("dlq: record %d/%d has no %s header; use --to", r.Partition, r.Offset, consumer.HeaderDLQTopic)
		}
		n := &kgo.Record{Topic: dest, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			if !dlqHeaders[h.Key] {
				n.Headers = append(n.Headers, h)
			}
		}
		out = append(out, n)
	}
	if dry {
		for _, r := range out {
			fmt.Fprintf(w, "would send key=%q to %s (event %s)\n", r.Key, r.Topic, eventid.FromRecord(r))
		}
		fmt.Fprintf(w, "%d records would be replayed\n", len(out))
		return nil
	}
	cl, err := broker.Client(kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return fmt.Errorf("dlq: replay: %w", err)
	}
	fmt.Fprintf(w, "%d records replayed\n", len(out))
	return nil
}
