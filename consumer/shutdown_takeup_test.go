package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShutdownDuringTakeUp: the shutdown begins while a fresh StartLatest
// partition is taken up, its parked sets' rebuild retrying (its park
// topic is missing, so it would retry for twice CommitTimeout). Run
// returns within its bound (ShutdownTimeout + CommitTimeout +
// LeaveTimeout), and its final commit hands the start position on: the
// partition's end when it was assigned, so the next owner reads what is
// produced after it and skips nothing.
func TestShutdownDuringTakeUp(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0", "a|1", "a|2")
	cfg := e.config("g-takeup", "chats")
	cfg.StartOffset = StartLatest
	cfg.Park.Enabled = true // chats.park is missing: the rebuild retries
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = 500*time.Millisecond, 10*time.Second, time.Second
	c, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	eventually(t, "the partition assigned", func() bool { return len(c.Stats().Partitions) == 1 })
	began := time.Now()
	stop()
	if err := wait(); err != nil {
		t.Logf("Run: %v", err)
	}
	bound := cfg.ShutdownTimeout + cfg.CommitTimeout + cfg.LeaveTimeout
	if took := time.Since(began); took > bound {
		t.Fatalf("Run returned %v after cancel, past its bound %v: the shutdown waited out the take-up", took.Round(time.Millisecond), bound)
	}
	offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := offs.Lookup("chats", 0); !ok || r.At != 3 {
		t.Fatalf("committed %+v (found %v); want the start position 3 handed on", r, ok)
	}
}

// TestStartLatestAssignedDuringShutdown: a partition added to the topic is
// assigned while the member drains for its shutdown (its handler holds
// the drain): nothing of it is handled here, but its start position
// (StartLatest: its end when assigned) is committed by the shutdown's
// final commit, so its next owner does not reset again and skip what was
// produced meanwhile.
func TestStartLatestAssignedDuringShutdown(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	cfg := e.config("g-late-assign", "chats")
	cfg.StartOffset = StartLatest
	cfg.ShutdownTimeout = 20 * time.Second
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		running <- struct{}{}
		<-release // the drain waits for it
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	waitFor(t, "the partition assigned", func() bool { return len(c.Stats().Partitions) == 1 }, func() string {
		return fmt.Sprintf("%+v", c.Stats().Partitions)
	})
	e.produceValues("chats", "a|0")
	<-running
	stop() // the shutdown begins; the drain waits for the handler
	adm := kadm.NewClient(e.client())
	if _, err := adm.CreatePartitions(context.Background(), 1, "chats"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new partition assigned during the shutdown", func() bool { return len(c.Stats().Partitions) == 2 })
	close(release)
	if err := wait(); err != nil {
		t.Logf("Run: %v", err)
	}
	offs, err := adm.FetchOffsets(context.Background(), cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := offs.Lookup("chats", 1); !ok || r.At != 0 {
		t.Fatalf("partition 1: committed %+v (found %v); want its start position 0 handed on", r, ok)
	}
}

// TestShutdownDuringSlowOffsetRead: the shutdown begins once a take-up
// is reading the group's committed offsets from a slow coordinator (the
// first read takes most of CommitTimeout, the next one longer). Run
// returns within its bound: the take-up's reads end CommitTimeout after
// the shutdown began. Before the fix only a shutdown begun before the
// take-up bounded them, and each read had a CommitTimeout of its own: the
// poll loop, which waits for the take-up, kept Run about 8.5 s, past a 7 s
// bound (the leave waits its LeaveTimeout behind the sleeping read here).
func TestShutdownDuringSlowOffsetRead(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	var reads atomic.Int64
	inTakeUp := make(chan struct{})
	e.c.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		switch reads.Add(1) {
		case 1: // the take-up's committed offsets: slow, within CommitTimeout
			close(inTakeUp)
			e.sleepFor(3500 * time.Millisecond)
		case 2: // the next read: slower than CommitTimeout
			e.sleepFor(time.Minute)
		}
		return nil, nil, false
	})
	cfg := e.config("g-slow-offset-read", "chats")
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = 2*time.Second, 4*time.Second, time.Second
	c, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	<-inTakeUp
	began := time.Now()
	stop()
	if err := wait(); err != nil {
		t.Logf("Run: %v", err)
	}
	bound := cfg.ShutdownTimeout + cfg.CommitTimeout + cfg.LeaveTimeout
	if took := time.Since(began); took > bound {
		t.Fatalf("Run returned %v after cancel, past its bound %v: the take-up's reads outlived the shutdown (%d offset reads)",
			took.Round(time.Millisecond), bound, reads.Load())
	}
}
