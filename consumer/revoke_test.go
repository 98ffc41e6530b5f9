package consumer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// busyOnA returns a handler for members run by runMember: on member A it
// calls block (which decides how A's handler waits) and closes the
// returned channel once A runs a handler on each of the topic's two
// partitions; on any other member it returns nil at once.
func busyOnA(block func(ctx context.Context) error) (func(context.Context, *Message) error, <-chan struct{}) {
	var mu sync.Mutex
	seen := map[int32]bool{}
	both := make(chan struct{})
	return func(ctx context.Context, m *Message) error {
		if ctx.Value(memberKey{}) != "A" {
			return nil
		}
		mu.Lock()
		if !seen[m.Record.Partition] {
			seen[m.Record.Partition] = true
			if len(seen) == 2 {
				close(both)
			}
		}
		mu.Unlock()
		return block(ctx)
	}, both
}

// revoking waits until c is draining a revoke: one of its partitions is
// fenced while its Run goes on.
func revoking(t *testing.T, c *Consumer) {
	t.Helper()
	eventually(t, "a revoke under way", func() bool {
		for _, p := range c.Stats().Partitions {
			if p.Draining {
				return true
			}
		}
		return false
	})
}

// TestShutdownBoundedDuringRevoke: a rolling deploy. The replacement joins,
// the old member starts a revoke and waits for its handlers (which honour
// their context but would run far longer), then gets its cancellation. The
// shutdown starts at the cancellation, not when the revoke is over: Run
// returns within ShutdownTimeout + CommitTimeout + LeaveTimeout, and every
// message is still handled once the new owner has it, in order.
func TestShutdownBoundedDuringRevoke(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(8)
	e.produce("chats", sessions, 1)
	h, busy := busyOnA(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	rec := newRecorder(len(sessions), h)
	cfg := e.config("g-revoke-bound", "chats")
	cfg.RevokeTimeout, cfg.HandlerTimeout = 40*time.Second, time.Minute
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = time.Second, time.Second, time.Second
	// B notices the rebalance soon, so A's leave, which waits for the
	// group's join under way, is not cut short (as with a real group's
	// 3s heartbeat and the 5s default LeaveTimeout).
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.HeartbeatInterval(100*time.Millisecond))
	a, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stopA, waitA := runMember(t, a, "A")
	<-busy
	b, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, b, "B")
	revoking(t, a)

	began := time.Now()
	stopA()
	_ = waitA() // ErrUnfinished: A's handlers were cut by the shutdown
	bound := cfg.ShutdownTimeout + cfg.CommitTimeout + cfg.LeaveTimeout
	if took := time.Since(began); took > bound+5*time.Second {
		t.Fatalf("Run returned %v after cancel during a revoke, bound %v", took, bound)
	}
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, sessions, 1)
}

// TestRevokeCancelsHandlers: a handler that honours its context but runs
// longer than RevokeTimeout (HandlerTimeout is longer still) is cancelled
// before the revoke gives its partition up, so the next owner never starts
// the session while it runs. The recorder flags any two calls of a session
// that overlap, across members.
func TestRevokeCancelsHandlers(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(8)
	e.produce("chats", sessions, 2)
	h, busy := busyOnA(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(testTimeout):
			return nil
		}
	})
	rec := newRecorder(len(sessions)*2, h)
	cfg := e.config("g-revoke-cancel", "chats")
	// The grace period (a tenth: 300ms) is the handlers' time to return
	// once cancelled, ample also on a busy machine.
	cfg.RevokeTimeout, cfg.HandlerTimeout = 3*time.Second, time.Minute
	cfg.ShutdownTimeout = time.Second
	a, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, a, "A")
	<-busy
	b, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	_, waitB := runMember(t, b, "B")
	eventually(t, "B handles a partition A gave up", func() bool {
		for _, c := range rec.snapshot() {
			if c.err == nil {
				return true
			}
		}
		return false
	})
	if n := a.Stats().RevokeOverruns; n != 0 {
		t.Errorf("RevokeOverruns = %d for handlers that honour their context", n)
	}
	rec.mu.Lock()
	overlaps := append([]string(nil), rec.overlaps...)
	rec.mu.Unlock()
	for _, o := range overlaps {
		t.Error("overlap across members:", o)
	}
	_ = waitB
}

// TestRevokeOverrunCounted: a handler that ignores its context is still
// running when the revoke gives its partition up. That case is not
// prevented (its lane cannot be stopped) but counted and reported.
func TestRevokeOverrunCounted(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(8)
	e.produce("chats", sessions, 1)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	h, busy := busyOnA(func(context.Context) error {
		<-release
		return nil
	})
	rec := newRecorder(len(sessions), h)
	cfg := e.config("g-revoke-overrun", "chats")
	cfg.RevokeTimeout, cfg.HandlerTimeout = 500*time.Millisecond, time.Minute
	a, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, a, "A")
	<-busy
	b, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, b, "B")
	eventually(t, "a revoke overrun counted", func() bool { return a.Stats().RevokeOverruns > 0 })
	once.Do(func() { close(release) })
	rec.wait(t)
}
