package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestBatchProgressWhileOpen: a batch call that began with the breaker
// closed finishes its first record and fails the next after the breaker
// opened meanwhile (the outage hit mid-batch). The new head's failure is
// the outage's: excused, not counted against its budget, so with
// MaxAttempts 1 it is not dead-lettered as retries-exhausted while the
// breaker is open. Before the fix the call's progress was reported as a
// success and nothing was excused: x|1 was dead-lettered.
func TestBatchProgressWhileOpen(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "x|0", "x|1", "f0|0", "f1|0", "f2|0", "f3|0")
	down := errors.New("dependency down")
	var c *Consumer
	xIn := make(chan struct{}) // x's call began: the others fail from then on
	var pair bool
	h := BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
		if s, _ := parseValue(ms[0].Record.Value); s != "x" {
			select {
			case <-xIn:
			case <-ctx.Done():
			}
			return down
		}
		if ms[0].Attempt > 1 || string(ms[0].Record.Value) != "x|0" {
			return down // x|1 again: the breaker is open (ProbeInterval is long)
		}
		pair = len(ms) == 2
		close(xIn)
		for !c.Stats().Breaker.Open { // the outage: four failures of the others open it
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return &BatchError{Done: 1, Err: down}
	})
	cfg := e.config("g-batch-open", "chats")
	cfg.Retry.MaxAttempts = 1
	cfg.HandlerTimeout = testTimeout
	cfg.Breaker = BreakerPolicy{Enabled: true, MinCalls: 4, FailureRatio: 0.5, Window: time.Minute, ProbeInterval: time.Hour}
	var err error
	if c, err = NewBatch(cfg, h); err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	// f0..f2 are dead-lettered (the breaker closed); f3's failure opens
	// it and is excused; x|1's, after the open, must be excused too.
	dead := func() int64 { return c.Stats().DeadLetteredByReason[ReasonRetriesExhausted] }
	waitFor(t, "f0..f2 dead-lettered and x|1's failure excused, or x|1 dead-lettered", func() bool {
		return c.Stats().Breaker.Excused >= 2 && dead() >= 3 || dead() > 3
	}, func() string { return fmt.Sprintf("%+v", c.Stats()) })
	s := c.Stats()
	if err := stop(); err != nil && !errors.Is(err, ErrUnfinished) {
		t.Fatal(err)
	}
	if !pair {
		t.Fatal("x|0 and x|1 did not come in one batch: the scenario did not happen")
	}
	if d := s.DeadLetteredByReason[ReasonRetriesExhausted]; d != 3 || s.Breaker.Excused != 2 || !s.Breaker.Open {
		t.Fatalf("%d dead-lettered as retries-exhausted, %d excused, breaker open %v; want 3 (f0..f2), 2 (f3, x|1), open",
			d, s.Breaker.Excused, s.Breaker.Open)
	}
}
