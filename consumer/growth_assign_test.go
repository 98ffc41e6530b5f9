package consumer

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGrowthLearntFromOtherPartitions: a member assigned only the
// partitions a growth added (2 to 7 of 8) learns the topic grew from 2
// from the commits of partitions it does not own (their growth sections).
// Found by review: reading only the partitions taken, it knew the count 8
// alone, saw no change, and handled the moved sessions out of order.
func TestGrowthLearntFromOtherPartitions(t *testing.T) {
	e := newEnv(t, 2, "chats")
	adm := kadm.NewClient(e.client())
	os := kadm.Offsets{}
	for _, p := range []int32{0, 1} {
		os.Add(kadm.Offset{Topic: "chats", Partition: p, At: 0, LeaderEpoch: -1, Metadata: growMetaSep + "2"})
	}
	if _, err := adm.CommitOffsets(context.Background(), "g", os); err != nil {
		t.Fatal(err)
	}
	e.grow("chats", 8)
	cfg := e.config("g", "chats")
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	cl := e.client()
	parts := c.own.assign(map[string][]int32{"chats": {2, 3, 4, 5, 6, 7}}, c.cfg.MaxBufferedRecords, c.flow.mark)
	c.growAssigned(parts, nil)
	c.loadCommitted(context.Background(), cl, parts)
	if h := c.grow.history("chats"); !h.Changing() {
		t.Logf("history %+v", h)
		t.Fatal("member assigned only the added partitions does not learn the topic grew from 2")
	}
}
