package consumer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
)

// TestWatermarkSafety: offsets complete out of order while offset 2 is held;
// the committed offset stops at 2. Then the consumer dies without a clean
// shutdown, and a new member of the group gets offset 2 again and nothing
// below it. Offsets 3..9 finished before the crash: with completed offsets
// in the commit metadata (the default) they are skipped; without, they run
// again.
func TestWatermarkSafety(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
		again   []int64 // offsets the restarted consumer must run
	}{
		{"with metadata", false, []int64{2}},
		{"without metadata", true, []int64{2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := crashAfterOutOfOrder(t, tc.disable, len(tc.again))
			for o := int64(0); o < 10; o++ {
				want := 0
				for _, a := range tc.again {
					if a == o {
						want = 1
					}
				}
				if seen[o] != want {
					t.Errorf("after restart offset %d ran %d times, want %d", o, seen[o], want)
				}
			}
			t.Logf("handler calls repeating work after the crash: %d", len(tc.again)-1)
		})
	}
}

// crashAfterOutOfOrder runs ten one-message sessions on one partition with
// offset 2 blocked, kills the consumer without committing, and returns how
// often each offset ran after a restart (which waits for want calls).
func crashAfterOutOfOrder(t *testing.T, disableMeta bool, want int) map[int64]int {
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
	cfg := e.config(fmt.Sprintf("g-wm-%v", disableMeta), "chats")
	cfg.ShutdownTimeout = 100 * time.Millisecond
	cfg.DisableCompletedOffsets = disableMeta
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t) // all but offset 2 handled: a handler's return is not yet its offset done
	// The commit to crash after is one whose metadata lists every offset
	// above 2 (3..9) completed. An earlier commit at 2, made while the last
	// offsets were still finishing, lists only some of them: offset 2 alone
	// is not the state this test needs.
	waitFor(t, "a commit at offset 2 listing 3..9 completed", func() bool {
		ps := c.Stats().Partitions
		if len(ps) != 1 || ps[0].Committed != 2 {
			return false
		}
		meta := committedMetaOf(c)
		if disableMeta {
			return meta == ""
		}
		return metaLists(meta, 2, offsets.Range{Start: 3, End: 9})
	}, func() string {
		return fmt.Sprintf("stats %+v, committed metadata %q", c.Stats().Partitions, committedMetaOf(c))
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

	again := newRecorder(want, nil)
	c2, err := New(cfg, again)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := start(t, c2)
	again.wait(t)
	eventually(t, "restarted watermark at the end", func() bool {
		ps := c2.Stats().Partitions
		return len(ps) == 1 && ps[0].Watermark == 10
	})
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, call := range again.snapshot() {
		seen[call.offset]++
	}
	if got, want := c2.Stats().SkippedDone, int64(10-2-want); got != want {
		t.Errorf("SkippedDone = %d, want %d", got, want)
	}
	return seen
}

// TestCommittedFromGroup: a member that takes over a partition reports the
// group's committed offset (and starts its watermark there) before it has
// committed anything itself.
func TestCommittedFromGroup(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", sessionNames(5), 4)
	cfg := e.config("g-committed", "chats")
	runAll(t, cfg, newRecorder(20, nil), 0)
	c2, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c2)
	eventually(t, "the group's committed offset", func() bool {
		ps := c2.Stats().Partitions
		return len(ps) == 1 && ps[0].Committed == 20 && ps[0].Watermark == 20
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c2.Stats().Commits != 0 {
		t.Errorf("%d commits by a member with nothing new to commit", c2.Stats().Commits)
	}
}

// committedMetaOf is the metadata of c's last acknowledged commit of its
// only partition ("" without one).
func committedMetaOf(c *Consumer) string {
	ps := c.own.all()
	if len(ps) != 1 {
		return ""
	}
	ps[0].mu.Lock()
	defer ps[0].mu.Unlock()
	rest, _, _ := splitParkMeta(ps[0].committedMeta) // the completed offsets: the growth and park sections cut
	return rest
}

// metaLists reports whether commit metadata meta was written at watermark
// wm and lists exactly the completed ranges want above it.
func metaLists(meta string, wm int64, want ...offsets.Range) bool {
	rest, _, _ := splitParkMeta(meta)
	at, rs, err := offsets.DecodeMetadata(rest)
	return err == nil && at == wm && slices.Equal(rs, want)
}
