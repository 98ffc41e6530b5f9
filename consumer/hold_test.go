package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// valueLog is a handler that records the value of every call, in order,
// runs an optional per-value behaviour, and signals when a value succeeds.
type valueLog struct {
	mu    sync.Mutex
	calls []string
	do    func(ctx context.Context, v string) error
	wants map[string]chan struct{}
	seen  map[string]bool
}

func newValueLog(do func(ctx context.Context, v string) error, wants ...string) *valueLog {
	l := &valueLog{do: do, wants: map[string]chan struct{}{}, seen: map[string]bool{}}
	for _, w := range wants {
		l.wants[w] = make(chan struct{})
	}
	return l
}

func (l *valueLog) Handle(ctx context.Context, m *Message) error {
	v := string(m.Record.Value)
	var err error
	if l.do != nil {
		err = l.do(ctx, v)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, v)
	if ch := l.wants[v]; ch != nil && err == nil && !l.seen[v] {
		l.seen[v] = true
		close(ch)
	}
	return err
}

// await waits until v was handled successfully.
func (l *valueLog) await(t *testing.T, v string) {
	t.Helper()
	l.mu.Lock()
	ch := l.wants[v]
	l.mu.Unlock()
	if ch == nil {
		t.Fatalf("await %q: not a wanted value", v)
	}
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %q to be handled", v)
	}
}

func (l *valueLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// TestResumeAfterSkippedRecords: a partition paused by backpressure whose
// held records all leave by being skipped (dead-lettered as stalled while
// their lane was stuck) resumes fetching. Pause follows what the partition
// holds on every change, not only when a handler returns.
func TestResumeAfterSkippedRecords(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	var values []string
	for i := 0; i < 10; i++ {
		values = append(values, fmt.Sprintf("a|%d", i))
	}
	e.produceValues("chats", values...)
	release := make(chan struct{})
	h := newValueLog(func(ctx context.Context, v string) error {
		if v == "a|0" {
			<-release // stuck, ignoring its context
		}
		return nil
	}, "b|0")
	cfg := e.config("g-skip-resume", "chats")
	cfg.MaxBufferedRecords = 4
	cfg.StallTimeout = 100 * time.Millisecond
	cfg.SkipStalled = true
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "all ten records skipped as stalled", func() bool {
		return c.Stats().DeadLetteredByReason[ReasonStalled] == 10
	})
	close(release)
	e.produceValues("chats", "b|0")
	h.await(t, "b|0")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := len(readDLQ(t, e, 10)); got != 10 {
		t.Fatalf("%d DLQ records, want 10", got)
	}
}

// TestSkipStalledStopsLane: once SkipStalled dead-lettered the record a
// lane keeps failing on, the lane makes no further attempt at it and
// handles the session's next message normally: one DLQ copy, the next
// message reaching the handler.
func TestSkipStalledStopsLane(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0", "a|1")
	h := newValueLog(func(ctx context.Context, v string) error {
		if v == "a|0" {
			return errors.New("downstream keeps failing")
		}
		return nil
	}, "a|1")
	cfg := e.config("g-skip-lane", "chats")
	cfg.Retry.Forever = true
	cfg.StallTimeout = 200 * time.Millisecond
	cfg.SkipStalled = true
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	h.await(t, "a|1")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	calls := h.snapshot()
	if calls[len(calls)-1] != "a|1" {
		t.Fatalf("a|0 attempted after a|1 ran: last calls %v", calls[max(len(calls)-5, 0):])
	}
	s := c.Stats()
	if s.DeadLettered != 1 || s.DeadLetteredByReason[ReasonStalled] != 1 {
		t.Fatalf("dead-lettered %v, want one record, as stalled", s.DeadLetteredByReason)
	}
	if dlq := readDLQ(t, e, 1); string(dlq[0].Value) != "a|0" || Reason(header(dlq[0], HeaderDLQReason)) != ReasonStalled {
		t.Fatalf("DLQ holds %q (%s), want a|0 as stalled", dlq[0].Value, Reason(header(dlq[0], HeaderDLQReason)))
	}
}

// TestMemoryBoundedWhileWatermarkHeld: one stuck record holds the
// watermark while every other session finishes. The records held behind
// it (done above the watermark) count toward MaxBufferedRecords, so the
// partition pauses instead of fetching, and tracking, without bound.
func TestMemoryBoundedWhileWatermarkHeld(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "stuck|0")
	e.produce("chats", sessionNames(50), 40) // 2,000 records behind it
	release := make(chan struct{})
	h := newValueLog(func(ctx context.Context, v string) error {
		if v == "stuck|0" {
			<-release
		}
		return nil
	})
	cfg := e.config("g-held", "chats")
	cfg.MaxBufferedRecords = 100
	cfg.MaxPollRecords = 20
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	defer close(release) // before start's cleanup stops the consumer
	eventually(t, "the partition paused, or everything behind the stuck record handled", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && (ps[0].Paused || len(h.snapshot()) == 2000)
	})
	ps := c.Stats().Partitions[0]
	if bound := cfg.MaxBufferedRecords + cfg.MaxPollRecords; ps.Pending > bound {
		t.Fatalf("%d records held behind the stuck one, bound %d (paused %v)", ps.Pending, bound, ps.Paused)
	}
}
