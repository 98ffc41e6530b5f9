package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOrderNone: one session's 40 records on an OrderNone topic run in
// parallel (eight at once are reached while the first waits), each is
// handled once, and the commit stays below a record still running: the
// committed offset waits at it until it finishes.
func TestOrderNone(t *testing.T) {
	e := newEnv(t, 1, "receipts")
	e.produce("receipts", []string{"chat-1"}, 40)
	var running atomic.Int64
	eight := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	rec := newRecorder(40, func(ctx context.Context, m *Message) error {
		if running.Add(1) >= 8 {
			once.Do(func() { close(eight) })
		}
		defer running.Add(-1)
		_, seq := parseValue(m.Record.Value)
		if seq < 8 {
			select { // the first eight wait for each other: they run at once or not at all
			case <-eight:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if seq == 0 {
			select { // the first record runs until the test says
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg := e.config("g", "receipts")
	cfg.Order = map[string]Order{"receipts": OrderNone}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	select {
	case <-eight:
	case <-time.After(testTimeout):
		t.Fatalf("at most %d records of the session ran at once; want 8", running.Load())
	}
	waitFor(t, "the 39 others handled", func() bool { return c.Stats().Processed == 39 }, nil)
	if ps := c.Stats().Partitions[0]; ps.Watermark != 0 || ps.Committed > 0 {
		t.Fatalf("watermark %d, committed %d while the record at offset 0 runs; want neither past 0", ps.Watermark, ps.Committed)
	}
	close(release)
	rec.wait(t)
	waitFor(t, "the commit past the last record", func() bool { return c.Stats().Partitions[0].Committed == 40 }, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(rec.snapshot()) != 40 {
		t.Fatalf("%d calls for 40 records; want each once", len(rec.snapshot()))
	}
}

// TestOrderPartition: two sessions on one partition of an OrderPartition
// topic run one record at a time, in offset order.
func TestOrderPartition(t *testing.T) {
	e := newEnv(t, 1, "ledger")
	e.produce("ledger", []string{"a", "b"}, 10)
	var running atomic.Int64
	var overlap atomic.Bool
	rec := newRecorder(20, func(context.Context, *Message) error {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		return nil
	})
	cfg := e.config("g", "ledger")
	cfg.Order = map[string]Order{"ledger": OrderPartition}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if overlap.Load() {
		t.Fatal("two records of the partition ran at once")
	}
	last := int64(-1)
	for _, cl := range rec.snapshot() {
		if cl.offset <= last {
			t.Fatalf("offset %d handled after %d", cl.offset, last)
		}
		last = cl.offset
	}
}

// TestOrderRefusesBadTopics: an order for a topic not consumed, or an
// unknown order, is a config error naming Order.
func TestOrderRefusesBadTopics(t *testing.T) {
	for _, o := range []map[string]Order{{"other": OrderNone}, {"t": Order(7)}} {
		cfg := Config{Brokers: []string{"x:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d", Order: o}
		if _, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil })); !errors.Is(err, ErrConfig) ||
			!strings.Contains(err.Error(), "Order") {
			t.Fatalf("New with Order %v: %v; want ErrConfig naming Order", o, err)
		}
	}
}
