package consumer

import (
	"context"
	"math"
	"time"
)

// watchdog reports handler attempts that run past HandlerTimeout plus a
// grace period (handlers that ignore their context), and stalled partitions
// (stall.go). Their lanes keep waiting
// for them (order is never given up), so the report is the operator's cue.
// A circuit breaker probe past the same limit is given up as hung by the
// breaker (breakerIdle), so that another lane probes.
// It runs every half HandlerTimeout or quarter StallTimeout, within 10ms..1s.
func (c *Consumer) watchdog(bg context.Context) {
	every := min(max(min(c.cfg.HandlerTimeout/2, c.cfg.StallTimeout/4), 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-bg.Done():
			return
		case now := <-t.C:
			c.scanSlow(now)
			c.checkStalls(bg, now)
			c.breakerIdle(now)
			c.member.watch(now)
		}
	}
}

// scanSlow reports the attempts running past their limit, and counts
// those running for Stats.Busy.
func (c *Consumer) scanSlow(t time.Time) {
	now := stampOf(t)
	limit := slowLimit(c.cfg.HandlerTimeout).Nanoseconds()
	running := 0
	defer func() { c.busy.sample(running, t) }()
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			since := l.since.Load()
			prev := l.reported.Load()
			if since != 0 {
				running++
			}
			if since == 0 || now-since < limit || prev == since {
				continue
			}
			// The lane runs on meanwhile: its record and attempt are the
			// timed attempt's only if since is still its start (begin
			// stores it last), and marking it reported by its start
			// leaves the lane's next attempt unmarked.
			w, attempt := l.cur.Load(), l.attempt.Load()
			if l.since.Load() != since || !l.reported.CompareAndSwap(prev, since) {
				continue // it ended while we looked
			}
			c.stats.slowHandlers.Add(1)
			c.log().Warn().Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).
				Int64("offset", w.rec.Offset).Str("session", w.session).Int32("attempt", attempt).
				Stringer("running", time.Duration(now-since)).Stringer("timeout", c.cfg.HandlerTimeout).
				Msg("handler ignores its context: still running past HandlerTimeout; its lane waits")
		}
		s.mu.Unlock()
	}
}

// slowGrace is how long past HandlerTimeout an attempt may run before it is
// reported: a tenth of the timeout, at most a second.
func slowGrace(timeout time.Duration) time.Duration { return min(timeout/10, time.Second) }

// slowLimit is how long an attempt may run before it is reported (and a
// breaker probe given up as hung): the timeout plus its grace, or
// time.Duration's largest when that sum would wrap.
func slowLimit(timeout time.Duration) time.Duration {
	if l := timeout + slowGrace(timeout); l >= timeout {
		return l
	}
	return math.MaxInt64
}
