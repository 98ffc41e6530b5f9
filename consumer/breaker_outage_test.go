package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// outage is a dependency that goes down after `after` successful calls,
// for as long as the test keeps it down, then recovers.
type outage struct {
	after   int64
	ok      atomic.Int64
	down    atomic.Bool
	failed  atomic.Int64 // attempts that failed while down
	started chan struct{}
	once    sync.Once

	mu        sync.Mutex
	endedAt   time.Time
	recovered time.Time // first success after the end
}

var errDatabaseDown = errors.New("database down")

func (o *outage) call(ctx context.Context, m *Message) error {
	time.Sleep(200 * time.Microsecond) // a query's worth of work
	if o.down.Load() {
		o.failed.Add(1)
		return errDatabaseDown
	}
	if o.ok.Add(1) == o.after {
		o.down.Store(true)
		o.once.Do(func() { close(o.started) })
		return nil
	}
	o.mu.Lock()
	if !o.endedAt.IsZero() && o.recovered.IsZero() {
		o.recovered = time.Now()
	}
	o.mu.Unlock()
	return nil
}

func (o *outage) end() {
	o.mu.Lock()
	o.endedAt = time.Now()
	o.mu.Unlock()
	o.down.Store(false)
}

const (
	outageFor     = time.Second
	probeInterval = 25 * time.Millisecond
	lanesInOutage = 40
)

// outageResult is what one run under an outage measured.
type outageResult struct {
	dlq, exhausted   int64
	failedAttempts   int64
	firstSuccess     time.Duration // from the outage's end to the first success
	allDone          time.Duration // from the outage's end to every message finished
	opens, excused   int64
	healthWhileOpen  string
	fetchedWhileOpen int64
}

// runOutage consumes sessions×per messages while the handler's dependency
// is down for outageFor, starting after a fifth of them succeeded; with
// breaker set, Config.Breaker is on. Order is checked for every message.
func runOutage(t *testing.T, breaker, batch bool) outageResult {
	e := newEnv(t, 4, "chats", "dlq")
	sessions := sessionNames(lanesInOutage)
	const before, per = 20, 30 // records per session produced before the start; in all
	const maxAttempts = 6
	e.produce("chats", sessions, before)
	o := &outage{after: int64(len(sessions) * before / 5), started: make(chan struct{})}
	rec := newRecorder(len(sessions)*per, o.call)
	if !breaker {
		rec.isLast = func(m *Message, err error) bool { return m.Attempt == maxAttempts }
	}
	cfg := e.config("g-outage", "chats")
	// A budget that lasts about 400 ms: shorter than the outage, longer
	// than the breaker's window.
	cfg.Retry = RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 100 * time.Millisecond, MaxAttempts: maxAttempts}
	if breaker {
		cfg.Breaker = BreakerPolicy{Enabled: true, Window: 200 * time.Millisecond, MinCalls: 20, FailureRatio: 0.5,
			ProbeInterval: probeInterval}
	}
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
	stop := start(t, c)
	select {
	case <-o.started:
	case <-time.After(testTimeout):
		t.Fatal("the outage never started")
	}
	var res outageResult
	deadline := time.Now().Add(outageFor) // the outage's length, not a synchronisation
	if breaker {
		eventually(t, "the breaker to open and pause fetching", func() bool {
			return c.Stats().Breaker.Open && len(c.client.Load().PauseFetchTopics()) == 1
		})
		for _, r := range c.Health().Reasons {
			if strings.HasPrefix(r, "breaker open since") {
				res.healthWhileOpen = r
			}
		}
		// Fetching is paused: records produced now are not fetched while
		// it is open.
		at := admitted(c)
		produceAll(t, e, sessions, before, per)
		time.Sleep(time.Until(deadline))
		res.fetchedWhileOpen = admitted(c) - at
		if !c.Stats().Breaker.Open {
			t.Error("the breaker closed while the dependency was still down")
		}
	} else {
		produceAll(t, e, sessions, before, per)
		time.Sleep(time.Until(deadline))
	}
	o.end()
	if breaker {
		// Fail fast: with the breaker no record may be dead-lettered.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		limit := time.After(testTimeout)
		for waiting := true; waiting; {
			select {
			case <-rec.full:
				waiting = false
			case <-limit:
				waiting = false // rec.wait reports it
			case <-tick.C:
				if n := c.Stats().DeadLettered; n > 0 {
					t.Fatalf("with the breaker %d records were dead-lettered", n)
				}
			}
		}
	}
	rec.wait(t)
	res.allDone = time.Since(o.endedAt)
	st := c.Stats()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, per)
	st = c.Stats()
	o.mu.Lock()
	res.firstSuccess = o.recovered.Sub(o.endedAt)
	o.mu.Unlock()
	res.dlq, res.exhausted = st.DeadLettered, st.DeadLetteredByReason[ReasonRetriesExhausted]
	res.failedAttempts = o.failed.Load()
	res.opens, res.excused = st.Breaker.Opens, st.Breaker.Excused
	if st.Breaker.Open {
		t.Error("the breaker is still open after the outage")
	}
	return res
}

// admitted is the number of records fetched so far, over every partition
// (what the poll loop handed to lanes: done, pending or dropped).
func admitted(c *Consumer) int64 {
	var n int64
	for _, p := range c.Stats().Partitions {
		n += p.HighWatermark - p.Lag + int64(p.Pending) // watermark + pending
	}
	return n
}

// TestBreakerOutage injects an outage of a dependency every handler uses:
// without the breaker, lanes spend their retry budgets and dead-letter
// records that were never bad; with it, nothing is dead-lettered, the
// failing dependency sees a probe per interval instead of every lane's
// retries, fetching pauses, and every session still runs in order.
func TestBreakerOutage(t *testing.T) {
	longtest.Only(t, "the outage comparison")
	off := runOutage(t, false, false)
	on := runOutage(t, true, false)
	t.Logf("without breaker: dead-lettered %d (retries-exhausted %d), failed attempts during the outage %d, first success %v and all done %v after it ended",
		off.dlq, off.exhausted, off.failedAttempts, off.firstSuccess.Round(time.Millisecond), off.allDone.Round(time.Millisecond))
	t.Logf("with breaker:    dead-lettered %d (retries-exhausted %d), failed attempts during the outage %d, first success %v and all done %v after it ended; opened %d, excused %d; health %q",
		on.dlq, on.exhausted, on.failedAttempts, on.firstSuccess.Round(time.Millisecond), on.allDone.Round(time.Millisecond), on.opens, on.excused, on.healthWhileOpen)
	if off.exhausted == 0 {
		t.Error("without the breaker the outage dead-lettered nothing: the test does not reproduce the flood")
	}
	if on.dlq != 0 {
		t.Errorf("with the breaker %d records were dead-lettered", on.dlq)
	}
	if on.opens == 0 || on.excused == 0 {
		t.Errorf("breaker opened %d times, excused %d failures", on.opens, on.excused)
	}
	if on.failedAttempts*2 > off.failedAttempts {
		t.Errorf("with the breaker the dependency saw %d failed attempts, without %d: want far fewer", on.failedAttempts, off.failedAttempts)
	}
	// While open: a probe per interval, plus the attempts already running
	// when it opened.
	if most := int64(outageFor/probeInterval) + int64(lanesInOutage); on.excused > most {
		t.Errorf("%d failed attempts while open, want at most %d", on.excused, most)
	}
	if on.healthWhileOpen == "" || !strings.Contains(on.healthWhileOpen, "attempts failed") {
		t.Errorf("Health while open: %q", on.healthWhileOpen)
	}
	if on.fetchedWhileOpen != 0 {
		t.Errorf("%d records fetched while the breaker was open", on.fetchedWhileOpen)
	}
}

// produceAll writes every session's messages from..to-1 to "chats".
func produceAll(t *testing.T, e *env, sessions []string, from, to int) {
	for _, s := range sessions {
		produceSeqs(t, e, "chats", s, from, to)
	}
}

// TestBreakerOutageBatch: the same outage under a batch handler with the
// breaker: nothing dead-lettered, order kept, fetching paused while open.
func TestBreakerOutageBatch(t *testing.T) {
	longtest.Only(t, "the outage under a batch handler")
	on := runOutage(t, true, true)
	t.Logf("batch with breaker: dead-lettered %d, failed attempts %d, opened %d, excused %d, all done %v after the end",
		on.dlq, on.failedAttempts, on.opens, on.excused, on.allDone.Round(time.Millisecond))
	if on.dlq != 0 || on.opens == 0 || on.fetchedWhileOpen != 0 {
		t.Errorf("dead-lettered %d, opened %d, fetched while open %d", on.dlq, on.opens, on.fetchedWhileOpen)
	}
}
