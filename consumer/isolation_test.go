package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHeadOfLineIsolation: one session fails until released; every other
// session on the same partition finishes meanwhile. The failing session is
// released only once the others are done, so their completion cannot have
// waited for it.
func TestHeadOfLineIsolation(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(40)
	const per = 10
	e.produce("chats", sessions, per)
	release := make(chan struct{})
	others := newRecorder((len(sessions)-1)*per, nil)
	var stuckCalls atomic.Int64
	tried := make(chan struct{}) // closed at the failing session's first call
	all := newRecorder(len(sessions)*per, func(ctx context.Context, m *Message) error {
		if m.SessionID == "chat-0000" {
			select {
			case <-release:
				return nil
			default:
				if stuckCalls.Add(1) == 1 {
					close(tried)
				}
				return errors.New("dependency down")
			}
		}
		return others.Handle(ctx, m)
	})
	cfg := e.config("g-hol", "chats")
	cfg.Retry = RetryPolicy{Forever: true, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}
	c, err := New(cfg, all)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	// The other sessions finish while chat-0000 fails (it is released only
	// below); its lane may get its worker after they are done: it is tried
	// before the release either way.
	others.wait(t)
	select {
	case <-tried:
	case <-time.After(testTimeout):
		t.Fatal("the failing session was never tried")
	}
	for _, call := range all.snapshot() {
		if call.session == "chat-0000" && call.seq > 0 {
			t.Fatalf("chat-0000 seq %d ran while seq 0 was failing", call.seq)
		}
	}
	close(release)
	all.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, all, []string{"chats"}, sessions, per)
}

// TestIdleSessionsEnd: 10,000 sessions create 10,000 lanes; with every
// handler blocked each gets a worker of its own (no lane waits for another's
// handler: all 10,000 handlers are inside at once); once their work is done
// every lane and its worker is gone.
func TestIdleSessionsEnd(t *testing.T) {
	e := newEnv(t, 4, "chats", "dlq")
	sessions := sessionNames(10_000)
	gate := make(chan struct{})
	var inside atomic.Int64
	rec := newRecorder(len(sessions), func(ctx context.Context, m *Message) error {
		inside.Add(1)
		<-gate // hold every lane open until all exist
		return nil
	})
	c, err := New(e.config("g-idle", "chats"), rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // a failure below must not leave Run waiting on blocked handlers
	eventually(t, "assignment", func() bool { return len(c.Stats().Partitions) == 4 })
	base := runtime.NumGoroutine()
	e.produce("chats", sessions, 1)
	eventually(t, "10,000 lanes", func() bool { return c.Stats().ActiveSessions == len(sessions) })
	// A lane waits in the run queue until every running worker is inside a
	// record; with every handler blocked, each then gets a worker of its own.
	waitFor(t, "a handler inside per blocked session", func() bool { return inside.Load() == int64(len(sessions)) },
		func() string {
			c.lanes.mu.Lock()
			defer c.lanes.mu.Unlock()
			return fmt.Sprintf("%d handlers inside, %d lanes queued, %d workers (%d parked, %d available), stats %+v",
				inside.Load(), len(c.lanes.runq), c.lanes.workers.Load(), len(c.lanes.parked), c.lanes.avail.Load(), c.Stats())
		})
	peak, peakWorkers, peakMem := runtime.NumGoroutine(), c.lanes.workers.Load(), memInUse()
	open()
	rec.wait(t)
	eventually(t, "lanes to retire", func() bool { return c.Stats().ActiveSessions == 0 })
	waitFor(t, "every worker to end", func() bool { return c.lanes.workers.Load() == 0 },
		func() string { return fmt.Sprintf("%d workers left:\n%s", c.lanes.workers.Load(), goroutines()) })
	t.Logf("goroutines: %d before, %d with 10,000 active sessions (%d workers), %d after idle; heap+stacks %.1f MiB with them, %.1f MiB after",
		base, peak, peakWorkers, runtime.NumGoroutine(), peakMem, memInUse())
	if peakWorkers < int64(len(sessions)) {
		t.Errorf("peak %d workers, want at least one per blocked session (%d)", peakWorkers, len(sessions))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTwoTopicsOneGroup: a session's messages from two topics share its lane
// and each topic's order holds.
func TestTwoTopicsOneGroup(t *testing.T) {
	e := newEnv(t, 2, "orders", "events", "dlq")
	sessions := sessionNames(30)
	const per = 15
	e.produce("orders", sessions, per)
	e.produce("events", sessions, per)
	rec := newRecorder(2*len(sessions)*per, nil)
	runAll(t, e.config("g-two-topics", "orders", "events"), rec, 0)
	checkOrder(t, rec, []string{"orders", "events"}, sessions, per)
}

// TestTwoGroupsOneTopic: two groups read one topic independently; each sees
// every message once, in order.
func TestTwoGroupsOneTopic(t *testing.T) {
	e := newEnv(t, 3, "chats", "dlq")
	sessions := sessionNames(30)
	const per = 15
	e.produce("chats", sessions, per)
	var recs []*recorder
	var stops []func() error
	for _, g := range []string{"g-billing", "g-search"} {
		rec := newRecorder(len(sessions)*per, nil)
		c, err := New(e.config(g, "chats"), rec)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		stops = append(stops, start(t, c))
	}
	for i, rec := range recs {
		rec.wait(t)
		if err := stops[i](); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, rec, []string{"chats"}, sessions, per)
		if n := len(rec.snapshot()); n != len(sessions)*per {
			t.Errorf("group %d: %d calls, want %d (each message once)", i, n, len(sessions)*per)
		}
	}
}

// TestNilKeysAndFilter: records with a nil key share one lane per
// partition, in offset order; filtered records never reach the handler,
// count as done and are counted.
func TestNilKeysAndFilter(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	cl := e.client()
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		r := cl.ProduceSync(ctx, recordNilKey("chats", i))
		if err := r.FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder(15, nil)
	cfg := e.config("g-nil", "chats")
	cfg.Filter = func(r *kgoRecord) bool { _, seq := parseValue(r.Value); return seq%4 != 3 }
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "watermark past the last filtered record", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Watermark == 20
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, call := range rec.snapshot() {
		if call.session != "" && call.session != "nil" {
			t.Fatalf("unexpected session %q", call.session)
		}
		offsets = append(offsets, call.offset)
	}
	if !slices.IsSorted(offsets) || len(offsets) != 15 {
		t.Fatalf("nil-key offsets %v: want 15 in order", offsets)
	}
	if got := c.Stats().Filtered; got != 5 {
		t.Errorf("Filtered = %d, want 5", got)
	}
}

// memInUse returns heap in use plus goroutine stacks, in MiB, after a GC.
// goroutines is the goroutine profile, grouped by stack.
func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

func memInUse() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse+ms.StackInuse) / (1 << 20)
}
