package consumer

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// Records with no session share their partition's lane; naming that lane
// must not cost an allocation per record (a topic without keys would pay
// one for every message).
func TestKeylessLaneAllocatesOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := unstarted(t, nil)
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

// Keyless records (no key, or SessionKey "") of each partition share that
// partition's lane, apart from every other partition's, whatever its topic;
// the lane's name in diagnostics says it has no session.
func TestKeylessLanePerPartition(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := unstarted(t, func(cfg *Config) {
		cfg.Topics = []string{"t", "u"}
		cfg.SessionKey = func(r *kgo.Record) string {
			if string(r.Key) == "anon" {
				return ""
			}
			return string(r.Key)
		}
	})
	lanes := map[string]string{} // lane → its partition
	for _, k := range []partKey{{"t", 0}, {"t", 1}, {"u", 0}, {"u", 10}} {
		p := newPartition(context.Background(), k, 1, 100, nil)
		recs := []*kgo.Record{{Topic: k.topic, Partition: k.partition, Offset: 0},
			{Topic: k.topic, Partition: k.partition, Offset: 1, Key: []byte("anon")},
			{Topic: k.topic, Partition: k.partition, Offset: 2, Key: []byte("s1")}}
		ws := c.admit(p, recs, 3)
		name := fmt.Sprintf("%s/%d", k.topic, k.partition)
		if len(ws) != 3 || ws[0].lane != ws[1].lane || ws[2].lane != "s1" || ws[0].session != "" || ws[1].session != "" {
			t.Fatalf("%s: lanes %q %q %q; want the first two on one keyless lane, the third on s1", name, ws[0].lane, ws[1].lane, ws[2].lane)
		}
		if got := sessionName(ws[0].lane); got != "(no session) "+name {
			t.Errorf("%s: keyless lane shows as %q", name, got)
		}
		if other, ok := lanes[ws[0].lane]; ok {
			t.Errorf("partitions %s and %s share keyless lane %q", other, name, ws[0].lane)
		}
		lanes[ws[0].lane] = name
	}
}
