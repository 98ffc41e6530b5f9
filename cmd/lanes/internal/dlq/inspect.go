package dlq

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// inspect prints the records of the dead-letter topic, at most limit (0:
// all), then the counts per reason of all of them.
func inspect(w io.Writer, topic string, recs []*kgo.Record, limit int, values bool) {
	if len(recs) > 0 {
		fmt.Fprintf(w, "# PARTITION/OFFSET: the record's place in %s; at: when it was dead-lettered (record timestamp, UTC);\n"+
			"# from: the topic/partition@offset it was consumed from\n", topic)
	}
	byReason := map[string]int{}
	for i, r := range recs {
		h := func(k string) string { v, _ := eventid.Header(r, k); return v }
		byReason[h(consumer.HeaderDLQReason)]++
		if limit > 0 && i >= limit {
			continue
		}
		fmt.Fprintf(w, "%d/%d at=%s key=%q reason=%s from=%s/%s@%s attempts=%s event=%s\n  error: %s\n",
			r.Partition, r.Offset, r.Timestamp.UTC().Format(time.RFC3339Nano), r.Key, h(consumer.HeaderDLQReason),
			h(consumer.HeaderDLQTopic), h(consumer.HeaderDLQPartition), h(consumer.HeaderDLQOffset),
			h(consumer.HeaderDLQAttempts), eventid.FromRecord(r), h(consumer.HeaderDLQError))
		if values {
			fmt.Fprintf(w, "  value: %q\n", r.Value)
		}
	}
	reasons := make([]string, 0, len(byReason))
	for k := range byReason {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	fmt.Fprint(w, cli.Count(len(recs), "record"))
	if limit > 0 && len(recs) > limit {
		fmt.Fprintf(w, " (%d shown, --limit %d)", limit, limit)
	}
	for _, k := range reasons {
		fmt.Fprintf(w, "; %s: %d", k, byReason[k])
	}
	fmt.Fprintln(w)
}
