package consumer

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestOrderManySessions: 300 sessions interleaved over 4 partitions, a
// handler that sleeps randomly; every session's messages run one at a time,
// in order, and all of them run.
func TestOrderManySessions(t *testing.T) {
	e := newEnv(t, 4, "chats", "dlq")
	sessions := sessionNames(300)
	const per = 20
	e.produce("chats", sessions, per)
	rec := newRecorder(len(sessions)*per, func(context.Context, *Message) error {
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		return nil
	})
	c := runAll(t, e.config("g-order", "chats"), rec, 0)
	checkOrder(t, rec, []string{"chats"}, sessions, per)
	if got := c.Stats().Processed; got != int64(len(sessions)*per) {
		t.Errorf("Stats.Processed = %d, want %d", got, len(sessions)*per)
	}
}

// TestOrderWithFailures: 10% transient errors and a few permanent ones. Order
// holds, transient failures are retried in place, permanent ones are in the
// DLQ with the right headers, nothing else is missing.
func TestOrderWithFailures(t *testing.T) {
	e := newEnv(t, 3, "chats", "dlq")
	sessions := sessionNames(50)
	const per = 40
	e.produce("chats", sessions, per)
	permanent := map[string]bool{"chat-0003|7": true, "chat-0010|0": true, "chat-0049|39": true}
	rec := newRecorder(len(sessions)*per, func(ctx context.Context, m *Message) error {
		if permanent[string(m.Record.Value)] {
			return Permanent(errors.New("cannot parse request"))
		}
		if rand.IntN(10) == 0 {
			return errors.New("downstream busy")
		}
		return nil
	})
	cfg := e.config("g-fail", "chats")
	cfg.Retry.MaxAttempts = 50 // transient errors never exhaust the budget here
	c := runAll(t, cfg, rec, int64(len(permanent)))
	checkOrder(t, rec, []string{"chats"}, sessions, per)
	st := c.Stats()
	if st.Retries == 0 {
		t.Error("no retries recorded with 10% transient errors")
	}
	if st.DeadLetteredByReason[ReasonPermanent] != int64(len(permanent)) {
		t.Errorf("DLQ by reason %v, want %d permanent", st.DeadLetteredByReason, len(permanent))
	}
	dlq := readDLQ(t, e, len(permanent))
	for _, r := range dlq {
		if !permanent[string(r.Value)] {
			t.Errorf("unexpected DLQ record %q", r.Value)
		}
		want := map[string]string{
			HeaderDLQTopic: "chats", HeaderDLQReason: string(ReasonPermanent), HeaderDLQAttempts: "1",
			HeaderDLQError: "permanent: cannot parse request",
		}
		for k, v := range want {
			if got := header(r, k); got != v {
				t.Errorf("DLQ %q header %s = %q, want %q", r.Value, k, got, v)
			}
		}
		if header(r, HeaderDLQOffset) == "" || header(r, HeaderDLQPartition) == "" {
			t.Errorf("DLQ %q lacks source position headers", r.Value)
		}
		s, _ := parseValue(r.Value)
		if string(r.Key) != s {
			t.Errorf("DLQ record key %q, want %q", r.Key, s)
		}
	}
}

// TestRetriesExhausted: a message that always fails goes to the DLQ with
// reason retries-exhausted after exactly MaxAttempts calls, and the session's
// next message runs after it.
func TestRetriesExhausted(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"a", "b"}, 3)
	rec := newRecorder(6, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "a|1" {
			return errors.New("always down")
		}
		return nil
	})
	rec.isLast = func(m *Message, err error) bool { return m.Attempt == 4 }
	cfg := e.config("g-exhaust", "chats")
	cfg.Retry.MaxAttempts = 4
	runAll(t, cfg, rec, 1)
	checkOrder(t, rec, []string{"chats"}, []string{"a", "b"}, 3)
	attempts := 0
	for _, c := range rec.snapshot() {
		if c.session == "a" && c.seq == 1 {
			attempts++
		}
	}
	if attempts != 4 {
		t.Errorf("a|1 handled %d times, want 4", attempts)
	}
	r := readDLQ(t, e, 1)[0]
	if Reason(header(r, HeaderDLQReason)) != ReasonRetriesExhausted || header(r, HeaderDLQAttempts) != "4" {
		t.Errorf("DLQ headers %v", r.Headers)
	}
}

// TestPanicRecovered: a panicking handler is an error, retried; the process
// survives and the message then succeeds.
func TestPanicRecovered(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"a"}, 3)
	rec := newRecorder(3, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "a|1" && m.Attempt == 1 {
			panic("nil map write")
		}
		return nil
	})
	c := runAll(t, e.config("g-panic", "chats"), rec, 0)
	if c.Stats().Panics != 1 {
		t.Errorf("Panics = %d, want 1", c.Stats().Panics)
	}
	checkOrder(t, rec, []string{"chats"}, []string{"a"}, 3)
}

// TestHandlerTimeout: each attempt's context ends at HandlerTimeout; a
// handler that honours it fails the attempt, and when the budget is spent
// the DLQ reason is "timeout".
func TestHandlerTimeout(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"a"}, 2)
	rec := newRecorder(2, func(ctx context.Context, m *Message) error {
		if m.Attempt <= 2 && string(m.Record.Value) == "a|0" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	rec.isLast = func(m *Message, err error) bool { return m.Attempt == 2 }
	cfg := e.config("g-timeout", "chats")
	cfg.HandlerTimeout = 50 * time.Millisecond
	cfg.Retry.MaxAttempts = 2
	c := runAll(t, cfg, rec, 1)
	if got := c.Stats().DeadLetteredByReason[ReasonTimeout]; got != 1 {
		t.Errorf("timeout DLQ writes = %d, want 1", got)
	}
}
