package dlq

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dlqHeaders are the headers the consumer adds to a dead-lettered record;
// replay removes them.
var dlqHeaders = map[string]bool{
	consumer.HeaderDLQTopic: true, consumer.HeaderDLQPartition: true, consumer.HeaderDLQOffset: true,
	consumer.HeaderDLQError: true, consumer.HeaderDLQAttempts: true, consumer.HeaderDLQReason: true,
}

// replay sends the records (those of reason, when given) back to their
// source topic or to. A dry run checks that every target topic exists and
// prints what it would send.
func replay(ctx context.Context, w io.Writer, f dlqFlags, opts []kgo.Opt, recs []*kgo.Record, to, reason string, dry bool) error {
	var out []*kgo.Record
	targets := map[string]bool{}
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
			return fmt.Errorf("record %d/%d of %s has no %s header: name the target topic with --to", r.Partition, r.Offset, f.topic, consumer.HeaderDLQTopic)
		}
		targets[dest] = true
		n := &kgo.Record{Topic: dest, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			if !dlqHeaders[h.Key] {
				n.Headers = append(n.Headers, h)
			}
		}
		out = append(out, n)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))...)
	if err != nil {
		return fmt.Errorf("brokers %s: %w", f.brokers, err)
	}
	defer cl.Close()
	if len(targets) > 0 {
		names := make([]string, 0, len(targets))
		for t := range targets {
			names = append(names, t)
		}
		sort.Strings(names)
		missing, err := missingTopics(ctx, kadm.NewClient(cl), names...)
		if err != nil {
			return awaitErr(f, "looking up the target topics "+strings.Join(names, ", "), err)
		}
		if len(missing) > 0 {
			flagHint := "create them or name another topic with --to"
			if to != "" {
				flagHint = "create it or fix --to"
			}
			return fmt.Errorf("target topic %s: no such topic on brokers %s: %s", strings.Join(missing, ", "), f.brokers, flagHint)
		}
	}
	if dry {
		for _, r := range out {
			fmt.Fprintf(w, "would send key=%q to %s (event %s)\n", r.Key, r.Topic, eventid.FromRecord(r))
		}
		fmt.Fprintf(w, "%s would be replayed\n", cli.Count(len(out), "record"))
		return nil
	}
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return awaitErr(f, "sending "+cli.Count(len(out), "record"), err)
	}
	fmt.Fprintf(w, "%s replayed\n", cli.Count(len(out), "record"))
	return nil
}
