package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMaxConcurrencyBound: 40 sessions with records waiting, a handler
// that takes a millisecond, MaxConcurrency 3: never more than 3 attempts
// run at once, every record is handled, each session in order.
func TestMaxConcurrencyBound(t *testing.T) {
	e := newEnv(t, 4, "chats")
	sessions := sessionNames(40)
	e.produce("chats", sessions, 5)
	var running, most atomic.Int64
	rec := newRecorder(len(sessions)*5, func(context.Context, *Message) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond) // the handler's work
		return nil
	})
	_, stop := startCapped(t, e, 3, rec)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 5)
	if m := most.Load(); m > 3 || m < 2 {
		t.Fatalf("at most %d attempts ran at once; want 2 or 3 under MaxConcurrency 3", m)
	}
}

// TestMaxConcurrencyFair: MaxConcurrency 1, a hot session with 20
// records and 10 sessions with one each, all waiting while the first
// attempt holds the only turn. Turns go in the order asked: the hot
// session's second record asks behind every other session's record, so
// all of them run before it.
func TestMaxConcurrencyFair(t *testing.T) {
	e := newEnv(t, 1, "chats")
	cold := sessionNames(10)
	e.produce("chats", []string{"hot"}, 20)
	e.produce("chats", cold, 1)
	gate := make(chan struct{})
	var first sync.Once
	rec := newRecorder(30, func(ctx context.Context, _ *Message) error {
		held := false
		first.Do(func() { held = true })
		if held {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	c, stop := startCapped(t, e, 1, rec)
	waitFor(t, "the ten other sessions waiting for the turn", func() bool { return c.Stats().WaitingForTurn == 10 },
		func() string { return fmt.Sprintf("%+v", c.Stats()) })
	close(gate)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, cl := range rec.snapshot() {
		order = append(order, fmt.Sprintf("%s/%d", cl.session, cl.seq))
	}
	second := slices.Index(order, "hot/1")
	for _, s := range cold {
		if i := slices.Index(order, s+"/0"); i > second {
			t.Fatalf("%s ran after the hot session's second record: %s", s, strings.Join(order, " "))
		}
	}
}

// TestMaxConcurrencyRefusesNegative: a negative bound is a config error
// naming the field.
func TestMaxConcurrencyRefusesNegative(t *testing.T) {
	cfg := Config{Brokers: []string{"x:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d", MaxConcurrency: -1}
	if _, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil })); !errors.Is(err, ErrConfig) ||
		!strings.Contains(err.Error(), "MaxConcurrency") {
		t.Fatalf("New with MaxConcurrency -1: %v; want ErrConfig naming MaxConcurrency", err)
	}
}

// TestMaxConcurrencyShutdownDropsWaiters: MaxConcurrency 1, 30 sessions
// each with a record of 100 ms of work. At shutdown the records still
// waiting for their turn drop out, as records queued in their lanes do:
// at most the attempt running and one that got the turn as the stop
// began are handled after it (before, every waiting record ran in turn,
// and the shutdown took 3 s).
func TestMaxConcurrencyShutdownDropsWaiters(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.produce("chats", sessionNames(30), 1)
	var stopping atomic.Bool
	var after atomic.Int64
	rec := newRecorder(30, func(ctx context.Context, _ *Message) error {
		if stopping.Load() {
			after.Add(1)
		}
		select { // the handler's work
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	c, stop := startCapped(t, e, 1, rec)
	waitFor(t, "the other sessions waiting for the turn", func() bool { return c.Stats().WaitingForTurn >= 20 }, nil)
	stopping.Store(true)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := after.Load(); n > 2 {
		t.Fatalf("%d attempts started after the shutdown began; want at most 2", n)
	}
}

// startCapped starts a consumer of "chats" with MaxConcurrency n and
// handler h.
func startCapped(t *testing.T, e *env, n int, h Handler) (*Consumer, func() error) {
	t.Helper()
	cfg := e.config("g", "chats")
	cfg.MaxConcurrency = n
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	return c, start(t, c)
}

// TestMaxConcurrencyTurnAfterHold: with MaxConcurrency 1, a record
// waits for the turn while a silence hold begins; when the turn comes
// it goes back to the gate instead of starting under the hold, and runs
// once the hold ends. (Before the mend, an attempt that waited for its
// turn started whatever began meanwhile.)
func TestMaxConcurrencyTurnAfterHold(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.produce("chats", []string{"first", "second"}, 1)
	release := make(chan struct{})
	var mu sync.Mutex
	var called []string
	rec := newRecorder(2, func(ctx context.Context, m *Message) error {
		mu.Lock()
		called = append(called, m.SessionID)
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	c, stop := startCapped(t, e, 1, rec)
	waitFor(t, "the second record waiting for the turn", func() bool { return c.Stats().WaitingForTurn == 1 },
		func() string { return fmt.Sprintf("%+v", c.Stats()) })
	g := &holdGate{since: time.Now(), over: make(chan struct{})}
	c.member.held.Store(g) // a silence hold, as checkSilence begins one (without cutting the running attempt)
	c.member.holds.Add(1)
	mu.Lock()
	first := called[0]
	mu.Unlock()
	release <- struct{}{} // the first returns: its turn goes to the second, under the hold
	waitFor(t, "the turn given back by the second record, or the second running", func() bool {
		mu.Lock()
		n := len(called)
		mu.Unlock()
		if n > 1 {
			return true
		}
		if c.Stats().WaitingForTurn != 0 || !c.turns.sem.TryAcquire(1) {
			return false
		}
		c.turns.sem.Release(1)
		return true
	}, func() string { return fmt.Sprintf("%+v", c.Stats()) })
	mu.Lock()
	if len(called) != 1 {
		mu.Unlock()
		t.Fatalf("calls %v: the record that waited for its turn started under the silence hold", called)
	}
	mu.Unlock()
	c.member.held.Store(nil)
	close(g.over)
	close(release)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(called) != 2 || called[0] != first {
		t.Fatalf("calls %v", called)
	}
}

// TestBusy: with MaxConcurrency 4 and every handler blocked, Stats.Busy
// (averaged over busyWindow, shortened here) reaches 4 and BusyRatio 1;
// once they return it falls back towards 0.
func TestBusy(t *testing.T) {
	was := busyWindow
	busyWindow = 50 * time.Millisecond
	t.Cleanup(func() { busyWindow = was })
	e := newEnv(t, 1, "chats")
	e.produce("chats", sessionNames(8), 1)
	release := make(chan struct{})
	rec := newRecorder(8, func(ctx context.Context, _ *Message) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	c, stop := startCapped(t, e, 4, rec)
	waitFor(t, "Busy near 4, BusyRatio near 1", func() bool {
		st := c.Stats()
		return st.Busy > 3.9 && st.Busy <= 4 && st.BusyRatio > 0.97 && st.BusyRatio <= 1
	}, func() string { st := c.Stats(); return fmt.Sprint(st.Busy, st.BusyRatio) })
	close(release)
	rec.wait(t)
	waitFor(t, "Busy back near 0", func() bool { return c.Stats().Busy < 0.1 }, func() string { return fmt.Sprint(c.Stats().Busy) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
