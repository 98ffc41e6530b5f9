package consumer

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// Records with no session share their partition's lane; naming that lane
// must not cost an allocation per record (a topic without keys would pay
// one for every message).
func TestKeylessLaneAllocatesOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "t-dlq"},
		HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	off := int64(0)
	recs := func() []*kgo.Record {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: "t", Partition: 3, Offset: off}
			off++
		}
		return rs
	}
	p := newPartition(context.Background(), partKey{"t", 3}, 1, 1<<30, nil)
	var batches [][]*kgo.Record
	for range 12 {
		batches = append(batches, recs())
	}
	i := 0
	allocs := testing.AllocsPerRun(10, func() {
		ws := c.admit(p, batches[i], off)
		i++
		if len(ws) != n || ws[0].lane != "\x00t/3" || ws[n-1].lane != ws[0].lane {
			t.Fatalf("admitted %d records, lanes %q and %q; want %d on lane %q", len(ws), ws[0].lane, ws[n-1].lane, n, "\x00t/3")
		}
	})
	if allocs >= n/10 {
		t.Errorf("admitting %d keyless records took %.0f allocations; want a few per fetch, not one per record", n, allocs)
	}
}
