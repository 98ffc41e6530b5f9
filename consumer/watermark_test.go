package consumer

import (
	"context"
	"testing"
	"time"
)

// TestWatermarkSafety: offsets complete out of order while offset 2 is held;
// the committed offset stops at 2 however many commits run. Then the
// consumer dies without a clean shutdown, and a new member of the group gets
// every offset from 2 on again, and nothing below.
func TestWatermarkSafety(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(10) // one message each: offsets 0..9
	e.produce("chats", sessions, 1)
	release := make(chan struct{})
	rec := newRecorder(9, func(ctx context.Context, m *Message) error {
		if m.SessionID == "chat-0002" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg := e.config("g-wm", "chats")
	cfg.ShutdownTimeout = 100 * time.Millisecond
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t) // all but offset 2 done
	eventually(t, "commit of offset 2", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Committed == 2
	})
	ps := c.Stats().Partitions[0]
	if ps.Committed != 2 || ps.Watermark != 2 || ps.Pending != 8 {
		t.Fatalf("committed %d watermark %d pending %d; want 2, 2, 8", ps.Committed, ps.Watermark, ps.Pending)
	}

	c.crashed.Store(true) // from here on the process is "dead": no commit
	err = stop()
	close(release)
	if err == nil {
		t.Fatal("Run returned nil with a handler still running past ShutdownTimeout")
	}

	again := newRecorder(8, nil)
	c2, err := New(cfg, again)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := start(t, c2)
	again.wait(t)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, call := range again.snapshot() {
		seen[call.offset]++
	}
	for o := int64(0); o < 10; o++ {
		want := 1
		if o < 2 {
			want = 0
		}
		if seen[o] != want {
			t.Errorf("after restart offset %d delivered %d times, want %d", o, seen[o], want)
		}
	}
	if st := c2.Stats(); len(st.Partitions) != 0 {
		t.Errorf("stats after Run keep partitions: %+v", st.Partitions)
	}
}
