package consumer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Per-session control with NewBatch: a batch is admitted by its head, so
// every other record in it must be covered by the head's admission.

// recordEach is a BatchHandler that hands each message to rec in order.
func recordEach(rec *recorder) BatchHandler {
	return BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
		for i, m := range ms {
			if err := rec.Handle(ctx, m); err != nil {
				return &BatchError{Done: i, Err: err}
			}
		}
		return nil
	})
}

// TestBatchPausedSessionShared: in a lane shared by sessions
// (OrderPartition), a batch ends before a paused session's record: the
// sessions ahead of it are handled, the lane then sleeps on the paused
// record (its partition's order holds the rest behind it), and the paused
// session is never handled until it is resumed; then every record runs,
// in order. Before the fix the paused session's records rode in the
// batches of the sessions ahead of them.
func TestBatchPausedSessionShared(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(4)
	const paused = "chat-0002" // the third record of the partition
	pauseBefore(t, e, "g-batch-pause", "chats", paused)
	e.produce("chats", sessions, 3)
	rec := newRecorder(12, nil)
	cfg := e.config("g-batch-pause", "chats")
	cfg.Order = map[string]Order{"chats": OrderPartition}
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.MaxBatch = 8
	c, err := NewBatch(cfg, recordEach(rec))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the two sessions ahead handled and the lane asleep on the paused one, or the paused one handled", func() bool {
		return handledOf(rec, paused) > 0 || len(rec.snapshot()) == 2 && c.Stats().Control.LanesPaused == 1
	}, func() string { return fmt.Sprintf("%d calls, %+v", len(rec.snapshot()), c.Stats().Control) })
	if n := handledOf(rec, paused); n != 0 {
		t.Fatalf("the paused session was handled %d times while paused (%d calls in all): it rode in another session's batch", n, len(rec.snapshot()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.ResumeSession(ctx, "chats", paused); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 3)
}

// TestBatchResourceSlot: a batch takes one slot of its head's resource,
// so a batch ends where the resource changes. Each of six sessions has a
// record of no resource, then one of resource x (Concurrency 1): at most
// one call holding an x record runs at a time. A call holding an x record
// counts itself in, handles its records, and waits until every session's
// first record was handled: with the fix those are handled in calls of
// their own, beside it; before it, each session's two records were one
// batch admitted by the first's (no) resource, and all six calls were in
// at once.
func TestBatchResourceSlot(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(6)
	e.produce("chats", sessions, 2)
	var inX, mostX, firsts atomic.Int64
	firstsDone := make(chan struct{})
	rec := newRecorder(12, func(_ context.Context, m *Message) error {
		if _, seq := parseValue(m.Record.Value); seq == 0 && firsts.Add(1) == int64(len(sessions)) {
			close(firstsDone)
		}
		return nil
	})
	isX := func(r *kgo.Record) bool { return strings.HasSuffix(string(r.Value), "|1") }
	cfg := e.config("g-batch-slot", "chats")
	cfg.Throttle = ThrottlePolicy{
		Resource: func(r *kgo.Record) string {
			if isX(r) {
				return "x"
			}
			return ""
		},
		Limits: map[string]Limit{"x": {Concurrency: 1}},
	}
	cfg.MaxBatch = 8
	c, err := NewBatch(cfg, BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
		x := slices.ContainsFunc(ms, func(m *Message) bool { return isX(m.Record) })
		if x {
			n := inX.Add(1)
			for m := mostX.Load(); n > m && !mostX.CompareAndSwap(m, n); m = mostX.Load() {
			}
			defer inX.Add(-1)
		}
		for i, m := range ms {
			if err := rec.Handle(ctx, m); err != nil {
				return &BatchError{Done: i, Err: err}
			}
		}
		if x {
			select {
			case <-firstsDone:
			case <-ctx.Done():
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 2)
	if m := mostX.Load(); m != 1 {
		t.Fatalf("resource x (Concurrency 1): %d calls holding its records ran at once; want 1", m)
	}
}
