package consumer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParkAttemptsAcrossHop: Message.Attempt goes on counting across the
// hop to the park topic (two attempts in the lane, then retries 3 and 4
// from the park topic), and the dead-letter copy of a record whose park
// budget is spent counts every attempt (lanes-dlq-attempts 4). A record
// forwarded behind its parked session had no attempt in its lane: its
// first retry is attempt 1.
func TestParkAttemptsAcrossHop(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	e.produceValues("chats", "s|0", "s|1")
	var mu sync.Mutex
	attempts := map[string][]int{}
	h := HandlerFunc(func(_ context.Context, m *Message) error {
		mu.Lock()
		defer mu.Unlock()
		v := string(m.Record.Value)
		attempts[v] = append(attempts[v], m.Attempt)
		if v == "s|0" {
			return errors.New("its backend is down")
		}
		return nil
	})
	cfg := e.config("g-park-hop", "chats")
	cfg.Park = ParkPolicy{Enabled: true, AfterAttempts: 2, MaxAttempts: 2, Delay: 10 * time.Millisecond, OnExhausted: ParkRelease}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	dl := readDLQ(t, e, 1)[0]
	eventually(t, "the session unparked", func() bool { return parkedRecords(c) == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := attempts["s|0"]; !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("s|0 attempts %v; want [1 2 3 4]: 2 in its lane, then 2 retries from the park topic", got)
	}
	if got := attempts["s|1"]; !slices.Equal(got, []int{1}) {
		t.Errorf("s|1 (forwarded) attempts %v; want [1]", got)
	}
	if r, n := headerOf(dl, HeaderDLQReason), headerOf(dl, HeaderDLQAttempts); r != string(ReasonParkExhausted) || n != "4" {
		t.Errorf("dead-lettered with reason %q and %s attempts; want park-exhausted and 4", r, n)
	}
}

// TestParkRetryUndecodable: a parked record whose retry returns
// Undecodable is dead-lettered with reason decode, as it would be in the
// source partition, and its session goes on.
func TestParkRetryUndecodable(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	e.produceValues("chats", "s|0", "s|1")
	var calls atomic.Int32
	rec := newRecorder(2, func(_ context.Context, m *Message) error {
		if string(m.Record.Value) == "s|0" {
			if calls.Add(1) == 1 {
				return Park(errors.New("down"))
			}
			return Undecodable(errors.New("unknown schema"))
		}
		return nil
	})
	cfg := e.config("g-park-decode", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	finishUnparked(t, c, rec, stop)
	checkOrder(t, rec, []string{"chats"}, []string{"s"}, 2)
	if r := headerOf(readDLQ(t, e, 1)[0], HeaderDLQReason); r != string(ReasonDecode) || c.Stats().DeadLetteredByReason[ReasonDecode] != 1 {
		t.Fatalf("dead-lettered with reason %q (by reason: %v); want decode", r, c.Stats().DeadLetteredByReason)
	}
}

// TestParkWhenRetryBudgetEnds: with parking on, a record whose in-lane
// retry budget ends before Park.AfterAttempts or Park.After (by attempts,
// or by time) is parked then, not dead-lettered: its retry from the park
// topic succeeds and nothing goes to the DLQ.
func TestParkWhenRetryBudgetEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry RetryPolicy
		park  ParkPolicy
	}{
		{"attempts", RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxAttempts: 2},
			ParkPolicy{AfterAttempts: 5}},
		{"elapsed", RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 20 * time.Millisecond, Jitter: -1,
			MaxElapsed: 30 * time.Millisecond}, ParkPolicy{AfterAttempts: 10, After: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "chats.park", "dlq")
			e.produceValues("chats", "s|0")
			var calls atomic.Int32
			var handled atomic.Bool
			h := HandlerFunc(func(context.Context, *Message) error {
				if calls.Add(1) <= 2 {
					return errors.New("its backend is down")
				}
				handled.Store(true)
				return nil
			})
			cfg := e.config("g-park-budget-"+tc.name, "chats")
			cfg.Retry = tc.retry
			cfg.Park = tc.park
			cfg.Park.Enabled, cfg.Park.Delay = true, 10*time.Millisecond
			c, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			eventually(t, "the record handled or dead-lettered", func() bool { return handled.Load() || c.Stats().DeadLettered > 0 })
			if st := c.Stats(); st.DeadLettered != 0 {
				t.Fatalf("dead-lettered %v after %d calls; want the record parked when its in-lane budget ended", st.DeadLetteredByReason, calls.Load())
			}
			eventually(t, "the session unparked", func() bool { return parkedRecords(c) == 0 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 3 {
				t.Fatalf("%d handler calls; want 3 (2 in its lane, then its retry from the park topic)", n)
			}
		})
	}
}
