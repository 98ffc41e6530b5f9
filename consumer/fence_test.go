package consumer

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLateWorkIsFenced: a handler still running when its partition is
// revoked (past RevokeTimeout) and the partition is assigned again finishes
// into the old assignment's state only; the new owner's tracker, and so
// its commits, never see it.
func TestLateWorkIsFenced(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"},
		HandlerFunc(func(ctx context.Context, m *Message) error {
			close(started)
			<-release
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	c.workCtx, c.cancelWork = context.WithCancel(context.Background())
	defer c.cancelWork()

	old := c.own.assign(map[string][]int32{"t": {0}}, 100, nil)[0]
	rec := &kgo.Record{Topic: "t", Partition: 0, Offset: 7, Key: []byte("s")}
	var w *work
	old.admit([]*kgo.Record{rec}, 8, nil, func(_ int, seq uint64) { w = &work{rec: rec, p: old, seq: seq} })
	l := &lane{key: "s"}

	done := make(chan struct{})
	go func() { defer close(done); c.process(l, w) }()
	<-started

	c.own.release(c.own.lookup(map[string][]int32{"t": {0}}))        // revoked: fenced, no longer owned
	fresh := c.own.assign(map[string][]int32{"t": {0}}, 100, nil)[0] // assigned again: a new epoch
	fresh.resume(7, nil, "")                                         // the new owner starts at the committed offset
	n := 0
	if fresh.admit([]*kgo.Record{rec}, 8, nil, func(int, uint64) { n++ }); n != 1 {
		t.Fatal("new assignment refused offset 7")
	}

	close(release)
	<-done
	if got := fresh.tr.Watermark(); got != 7 {
		t.Fatalf("late completion moved the new owner's watermark to %d", got)
	}
	if got := old.tr.Watermark(); got != 8 {
		t.Fatalf("old assignment's watermark %d, want 8 (its own record done)", got)
	}
	select {
	case <-old.drained:
	default:
		t.Fatal("old assignment not drained after its last handler returned")
	}
	if owned := c.own.all(); len(owned) != 1 || owned[0] != fresh {
		t.Fatal("owned set does not hold exactly the new assignment")
	}
}
