package consumer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
