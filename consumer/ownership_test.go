package consumer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// memberKey marks the Run context of a test member, so a shared handler
// can tell the members apart.
type memberKey struct{}

// runMember starts c.Run with a context naming the member; cancel starts
// its shutdown, wait returns Run's error once it returned (bounded by the
// test timeout).
func runMember(t *testing.T, c *Consumer, name string) (cancel context.CancelFunc, wait func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), memberKey{}, name))
	done := make(chan struct{})
	var err error
	go func() { defer close(done); err = c.Run(ctx) }()
	wait = func() error {
		select {
		case <-done:
			return err
		case <-time.After(testTimeout):
			t.Errorf("member %s: Run did not return", name)
			return nil
		}
	}
	t.Cleanup(func() { cancel(); wait() })
	return cancel, wait
}

// TestRevokeDuringShutdownWaitsForDrain: a rolling deploy. Member A is
// shutting down, its handlers still running, when member B joins. The
// partitions B is given must not start there before A's handlers finished
// and A committed: no session runs on two members at once, and nothing A
// finished is run again by B (exactly once here, as every started record
// finishes within the drain).
func TestRevokeDuringShutdownWaitsForDrain(t *testing.T) {
	e := newEnv(t, 2, "chats")
	sessions := sessionNames(20)
	const per = 5
	e.produce("chats", sessions, per)

	release := make(chan struct{})
	var mu sync.Mutex
	runningOnA := map[int32]bool{}
	aBusy := make(chan struct{}) // closed once A runs a handler on both partitions
	rec := newRecorder(len(sessions)*per, func(ctx context.Context, m *Message) error {
		if ctx.Value(memberKey{}) != "A" {
			return nil
		}
		mu.Lock()
		if !runningOnA[m.Record.Partition] {
			runningOnA[m.Record.Partition] = true
			if len(runningOnA) == 2 {
				close(aBusy)
			}
		}
		mu.Unlock()
		<-release
		return nil
	})
	cfg := e.config("g-rolling", "chats")
	cfg.ShutdownTimeout = testTimeout
	a, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stopA, waitA := runMember(t, a, "A")
	<-aBusy
	stopA() // A drains: its handlers are blocked until release

	b, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, b, "B")
	eventually(t, "B to join the group", func() bool { return b.Stats().Rebalances > 0 })
	// An observation window: a partition wrongly handed over while A
	// drains would start on B now (nothing signals that it did not).
	time.Sleep(500 * time.Millisecond)
	close(release)

	if err := waitA(); err != nil {
		t.Fatalf("A's Run: %v", err)
	}
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, sessions, per)
}

// TestStartLatestCommitsPosition: with StartLatest, a partition that never
// returned a record still commits where it started, so a member that
// takes over later reads what was produced in between instead of
// resetting to the end again.
func TestStartLatestCommitsPosition(t *testing.T) {
	e := newEnv(t, 2, "chats")
	e.produceValues("chats", "old|0", "old|1") // before the group: never read
	cfg := e.config("g-latest", "chats")
	cfg.StartOffset = StartLatest
	first, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, first)
	eventually(t, "start positions of both partitions", func() bool {
		ps := first.Stats().Partitions
		return len(ps) == 2 && ps[0].Watermark >= 0 && ps[1].Watermark >= 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), "g-latest")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := offs.Lookup("chats", p); !ok || o.At < 0 {
			t.Fatalf("partition %d: no committed position after a clean shutdown", p)
		}
	}

	e.produceValues("chats", "new|0", "new|1", "new|2") // while no member runs
	rec := newRecorder(3, nil)
	runAll(t, cfg, rec, 0)
	for _, c := range rec.snapshot() {
		if c.session != "new" {
			t.Fatalf("handled %s|%d, produced before the group existed", c.session, c.seq)
		}
	}
}
