package consumer

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// hungProbe is the handler side of TestBreakerHungProbe: a dependency that
// is down until the test says it recovered, one session ("hung") whose
// probe ignores its context and blocks until the test releases it, and the
// other sessions, whose first attempts wait until the breaker opened so
// that only hung's failures open it (and hung's next attempt is therefore
// the first probe: no other attempt can start while it is open).
type hungProbe struct {
	c        *Consumer
	others   int
	down     atomic.Bool
	started  atomic.Int64  // other sessions' first attempts under way
	allIn    chan struct{} // closed when every other session's first attempt runs
	opened   chan struct{} // closed by the test once the breaker is open
	hanging  chan struct{} // closed when hung's probe blocks
	release  chan struct{} // closed by the test: hung's probe returns
	once     sync.Once
	hangOnce sync.Once
	first    sync.Map // session → struct{}: its first attempt came
}

const hungSession = "chat-hung"

func (h *hungProbe) call(ctx context.Context, m *Message) error {
	if m.SessionID == hungSession {
		if !h.down.Load() {
			return nil
		}
		if h.c.Stats().Breaker.Open {
			// Only hung's failures opened the breaker, so this attempt was
			// let start while it was open: it is the probe.
			hung := false
			h.hangOnce.Do(func() { hung = true })
			if hung {
				close(h.hanging)
				select { // ignores ctx: a handler stuck on a call without deadline
				case <-h.release:
				case <-time.After(testTimeout):
				}
				return context.DeadlineExceeded
			}
			return errDatabaseDown
		}
		select { // fail only once the other sessions are under way
		case <-h.allIn:
		case <-ctx.Done():
		}
		return errDatabaseDown
	}
	if _, seen := h.first.LoadOrStore(m.SessionID, struct{}{}); !seen {
		if h.started.Add(1) == int64(h.others) {
			h.once.Do(func() { close(h.allIn) })
		}
		select { // ignores ctx: must not report before the breaker opened
		case <-h.opened:
		case <-time.After(testTimeout):
		}
	}
	if h.down.Load() {
		return errDatabaseDown
	}
	return nil
}

// TestBreakerHungProbe: while the breaker is open, the probe's handler
// ignores its context and blocks. The probe is given up as hung once it
// runs past HandlerTimeout plus its grace: the next probe runs on another
// session's lane, succeeds once the dependency is back and closes the
// breaker, so every other session's messages are handled; the hung
// session keeps its order (its next message waits for the hung handler to
// return) and finishes once it does.
func TestBreakerHungProbe(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batch"}[batch], func(t *testing.T) {
			testBreakerHungProbe(t, batch)
		})
	}
}

func testBreakerHungProbe(t *testing.T, batch bool) {
	e := newEnv(t, 3, "chats", "dlq")
	others := sessionNames(6)
	sessions := append([]string{hungSession}, others...)
	const per = 3
	e.produce("chats", sessions, per)

	h := &hungProbe{others: len(others), allIn: make(chan struct{}), opened: make(chan struct{}),
		hanging: make(chan struct{}), release: make(chan struct{})}
	h.down.Store(true)
	rec := newRecorder(len(sessions)*per, h.call)
	var logs syncBuffer
	lg := zerolog.New(&logs)
	cfg := e.config("g-hung-probe", "chats")
	cfg.Logger = &lg
	cfg.HandlerTimeout = 200 * time.Millisecond
	cfg.Retry.Forever = true
	cfg.Breaker = BreakerPolicy{Enabled: true, Window: time.Second, MinCalls: 3, FailureRatio: 0.5,
		ProbeInterval: 50 * time.Millisecond}
	var c *Consumer
	var err error
	if batch {
		c, err = NewBatch(cfg, BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
			for i, m := range ms {
				if err := rec.Handle(ctx, m); err != nil {
					return &BatchError{Done: i, Err: err}
				}
			}
			return nil
		}))
	} else {
		c, err = New(cfg, rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	var released sync.Once
	releaseHung := func() { released.Do(func() { close(h.release) }) }

	runUntil(t, c, func(t *testing.T) {
		t.Cleanup(releaseHung) // runs before start's stop: the hung handler must return for Run to end
		eventually(t, "the breaker to open", func() bool { return c.Stats().Breaker.Open })
		close(h.opened)
		select {
		case <-h.hanging:
		case <-time.After(testTimeout):
			t.Fatal("the hung session's probe never ran")
		}
		h.down.Store(false) // the outage ends; the hung probe does not notice
		eventually(t, "the breaker to close on another session's probe", func() bool { return !c.Stats().Breaker.Open })
		eventually(t, "every other session's messages handled", func() bool { return finishedOf(rec, others) == len(others)*per })
		for _, cl := range rec.snapshot() {
			if cl.session == hungSession && cl.seq > 0 {
				t.Fatalf("%s seq %d handled while its seq 0 was still running: order broken", hungSession, cl.seq)
			}
		}
		releaseHung()
		rec.wait(t)
	}, 0)
	checkOrder(t, rec, []string{"chats"}, sessions, per)
	st := c.Stats()
	if st.DeadLettered != 0 {
		t.Errorf("%d records dead-lettered", st.DeadLettered)
	}
	if st.Breaker.HungProbes != 1 || st.Breaker.Probes < 2 {
		t.Errorf("Stats.Breaker %+v: want one probe given up as hung and another that closed it", st.Breaker)
	}
	warned := false
	for _, l := range strings.Split(string(logs.Bytes()), "\n") {
		warned = warned || strings.Contains(l, "probe given up as hung") &&
			strings.Contains(l, `"session":"`+hungSession+`"`) && strings.Contains(l, `"offset":`)
	}
	if !warned {
		t.Error("no warning naming the hung probe's session and offset")
	}
}

// finishedOf counts the messages of sessions the recorder saw finished.
func finishedOf(r *recorder, sessions []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range sessions {
		for seq := 0; ; seq++ {
			if !r.finished["chats|"+s+"|"+strconv.Itoa(seq)] {
				break
			}
			n++
		}
	}
	return n
}
