package consumer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestSkipStalledWithParking: with parking on, SkipStalled skips only a
// record whose handler attempt is running (a hung handler), as without
// parking; a record failing between attempts past StallTimeout is parked
// by its lane, its session kept in order, and not dead-lettered as
// stalled (it was, the moment its retry wait passed StallTimeout).
func TestSkipStalledWithParking(t *testing.T) {
	t.Run("failing between attempts", func(t *testing.T) {
		e := newEnv(t, 1, "chats", "chats.park", "dlq")
		e.produceValues("chats", "a|0", "b|0", "a|1")
		var failures atomic.Int32
		rec := newRecorder(3, func(_ context.Context, m *Message) error {
			if string(m.Record.Value) == "a|0" && failures.Add(1) <= 4 {
				return errors.New("downstream down")
			}
			return nil
		})
		cfg := e.config("g-skip-park-failing", "chats")
		cfg.StallTimeout, cfg.SkipStalled = 300*time.Millisecond, true
		// Four attempts in its lane, 1.5 s of retry waits: the watermark
		// stalls long before the record is parked.
		cfg.Retry = RetryPolicy{InitialInterval: 300 * time.Millisecond, MaxInterval: 600 * time.Millisecond, Jitter: -1}
		cfg.Park = ParkPolicy{Enabled: true, AfterAttempts: 4, After: time.Hour, Delay: 100 * time.Millisecond}
		c, err := New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, c)
		rec.wait(t)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.Stalls == 0 {
			t.Fatal("the partition was never reported stalled: the case was not tried")
		}
		if n := st.DeadLetteredByReason[ReasonStalled]; n != 0 {
			t.Fatalf("%d records dead-lettered as stalled; want a|0 parked, not skipped", n)
		}
		if n := failures.Load(); n != 5 {
			t.Fatalf("a|0 tried %d times; want 4 in its lane and 1 from the park topic", n)
		}
		checkOrder(t, rec, []string{"chats"}, []string{"a"}, 2)
	})
	t.Run("hung attempt", func(t *testing.T) {
		e := newEnv(t, 1, "chats", "chats.park", "dlq")
		e.produceValues("chats", "a|0", "b|0", "a|1")
		release := make(chan struct{})
		rec := newRecorder(3, func(_ context.Context, m *Message) error {
			if string(m.Record.Value) == "a|0" {
				<-release // ignores its context, on purpose
			}
			return nil
		})
		cfg := e.config("g-skip-park-hung", "chats")
		cfg.StallTimeout, cfg.SkipStalled = 300*time.Millisecond, true
		cfg.Park = ParkPolicy{Enabled: true}
		c, err := New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, c)
		eventually(t, "the hung record skipped to the DLQ", func() bool { return c.Stats().DeadLetteredByReason[ReasonStalled] == 1 })
		close(release)
		rec.wait(t)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, rec, []string{"chats"}, []string{"a"}, 2)
	})
}
