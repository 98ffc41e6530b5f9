package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lanesdev/lanes/hashring"
)

// TestBackpressure: one session with a 1,000-message backlog on one
// partition blocks. That partition pauses with at most its bound (plus one
// poll) in memory, its lag stays visible, the other partitions keep flowing;
// once released, everything runs in order and nothing is lost.
func TestBackpressure(t *testing.T) {
	const parts, bound, poll = 3, 100, 20
	e := newEnv(t, parts, "chats", "dlq")
	slowPart, _ := hashring.KafkaPartition([]byte("slow"), parts)
	var others []string
	for i := 0; len(others) < 30; i++ {
		s := fmt.Sprintf("fast-%d", i)
		if p, _ := hashring.KafkaPartition([]byte(s), parts); p != slowPart {
			others = append(others, s)
		}
	}
	e.produce("chats", []string{"slow"}, 1000)
	e.produce("chats", others, 20)

	gate := make(chan struct{})
	fast := newRecorder(len(others)*20, nil)
	all := newRecorder(1000+len(others)*20, func(ctx context.Context, m *Message) error {
		if m.SessionID == "slow" {
			<-gate
			return nil
		}
		return fast.Handle(ctx, m)
	})
	cfg := e.config("g-bp", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = bound, poll
	c, err := New(cfg, all)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	fast.wait(t) // other partitions flowed while "slow" was blocked
	var slow PartitionStats
	eventually(t, "slow partition paused with its lag visible", func() bool {
		for _, ps := range c.Stats().Partitions {
			if ps.Partition == int32(slowPart) {
				slow = ps
			}
		}
		return slow.Paused && slow.Lag > 0
	})
	held := slow.Buffered + slow.InFlight
	t.Logf("paused partition: %d records held (bound %d), lag %d, high watermark %d", held, bound, slow.Lag, slow.HighWatermark)
	if held > bound+poll {
		t.Fatalf("partition holds %d records, bound %d + one poll %d", held, bound, poll)
	}
	if slow.HighWatermark != 1000 || slow.Lag != 1000 {
		t.Errorf("lag %d (high watermark %d), want 1000 (1000)", slow.Lag, slow.HighWatermark)
	}
	close(gate)
	all.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, all, []string{"chats"}, []string{"slow"}, 1000)
	checkOrder(t, all, []string{"chats"}, others, 20)
}

// TestRebalanceHandover: three members join and one leaves while messages
// are retried. Every message is handled at least once; no session ever runs
// two messages at once, and a first-time delivery never comes before the
// previous message of its session finished, across handovers too.
func TestRebalanceHandover(t *testing.T) {
	e := newEnv(t, 6, "chats", "dlq")
	sessions := sessionNames(60)
	const per = 150
	e.produce("chats", sessions, per)
	rec := newRecorder(len(sessions)*per, func(ctx context.Context, m *Message) error {
		time.Sleep(time.Duration(2000+rand.IntN(6000)) * time.Microsecond)
		if rand.IntN(10) == 0 {
			return fmt.Errorf("transient")
		}
		return nil
	})
	cfg := e.config("g-rebalance", "chats")
	cfg.Retry.MaxAttempts = 100
	member := func() (*Consumer, func() error) {
		c, err := New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		return c, start(t, c)
	}
	finished := func(n int) func() bool {
		return func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.finished) >= n }
	}
	// A member started is not yet a member of the group: the progress
	// counted "on two members" is counted once B owns partitions (A alone
	// can reach any count before B's join completes, and then leave the
	// group before anything was handed over).
	assigned := func(c *Consumer) func() bool {
		return func() bool { return len(c.Stats().Partitions) > 0 }
	}
	a, stopA := member()
	eventually(t, "progress on one member", finished(500))
	b, stopB := member()
	eventually(t, "B assigned partitions", assigned(b))
	eventually(t, "progress on two members", finished(3000))
	c, stopC := member()
	eventually(t, "C assigned partitions", assigned(c))
	eventually(t, "progress on three members", finished(5000))
	if err := stopA(); err != nil {
		t.Fatalf("member A leaving: %v", err)
	}
	rec.wait(t)
	for _, stop := range []func() error{stopB, stopC} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if a.Stats().Rebalances < 2 {
		t.Errorf("member A saw %d assignments; the test did not rebalance", a.Stats().Rebalances)
	}
	checkAtLeastOnceOrder(t, rec, sessions, per)
}

// checkAtLeastOnceOrder is checkOrder for runs with redelivery: a call of
// seq n is either a repeat (n already finished) or the first delivery of
// the next message, which must come after n-1 finished.
func checkAtLeastOnceOrder(t *testing.T, r *recorder, sessions []string, per int) {
	t.Helper()
	r.mu.Lock()
	for _, o := range r.overlaps {
		t.Error("overlap:", o)
	}
	r.mu.Unlock()
	next := map[string]int{}
	repeats := 0
	for _, c := range r.snapshot() {
		n := next[c.session]
		switch {
		case c.seq < n:
			repeats++
		case c.seq > n:
			t.Fatalf("%s: seq %d delivered before seq %d finished", c.session, c.seq, n)
		case c.err == nil:
			next[c.session]++
		}
	}
	for _, s := range sessions {
		if next[s] != per {
			t.Errorf("%s: %d of %d messages finished", s, next[s], per)
		}
	}
	t.Logf("%d calls repeated work after handovers", repeats)
}

// TestShutdownUnderLoad: cancelling Run under load drains, commits exactly
// the watermark (every lower offset was handled; the offset committed was
// not), and leaves no goroutine behind.
func TestShutdownUnderLoad(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(100)
	e.produce("chats", sessions, 50)
	base := runtime.NumGoroutine()
	rec := newRecorder(len(sessions)*50, func(context.Context, *Message) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	cfg := e.config("g-shutdown", "chats")
	cfg.DisableCompletedOffsets = true
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "load", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.finished) >= 1500 })
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	waitFor(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base },
		func() string {
			return fmt.Sprintf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, goroutines())
		})
	done := map[int32]map[int64]bool{}
	for _, call := range rec.snapshot() {
		if call.err == nil {
			if done[call.partition] == nil {
				done[call.partition] = map[int64]bool{}
			}
			done[call.partition][call.offset] = true
		}
	}
	adm := kadm.NewClient(e.client())
	offs, err := adm.FetchOffsets(context.Background(), "g-shutdown")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		o, ok := offs.Lookup("chats", p)
		if !ok {
			t.Fatalf("partition %d: nothing committed", p)
		}
		for off := int64(0); off < o.At; off++ {
			if !done[p][off] {
				t.Fatalf("partition %d: committed %d but offset %d was not handled", p, o.At, off)
			}
		}
		if done[p][o.At] {
			t.Fatalf("partition %d: committed %d, below the watermark (that offset was handled)", p, o.At)
		}
		t.Logf("partition %d: committed %d, handled %d", p, o.At, len(done[p]))
	}
}
