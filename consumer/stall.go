package consumer

import (
	"context"
	"time"

	"github.com/lanesdev/lanes/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// checkStalls reports partitions whose watermark has been held by one
// record for StallTimeout, not counting the time this member's work was
// held as a whole (stall_clock.go), and with SkipStalled dead-letters that
// record so the partition moves on. While a hold is in force nothing is
// stalled, so nothing is skipped. It runs on the watchdog goroutine; the
// hot path pays nothing for it (the watchdog samples watermarks).
func (c *Consumer) checkStalls(bg context.Context, now time.Time) {
	hr := c.held.Read(now)
	for _, p := range c.own.all() {
		s := p.stallCheck(now, c.cfg.StallTimeout, hr)
		if !s.stalled {
			continue
		}
		w, l, attempt := c.holder(p, s.seq)
		if attempt < 0 { // queued in a sleeping lane: its session, or one ahead of it in its lane, is paused or throttled
			p.restartStall(now, hr) // an operator's choice, not a stall (Health names it)
			continue
		}
		if s.fresh {
			c.stats.stalls.Add(1)
			ev := c.log().Warn().Str("topic", p.key.topic).Int32("partition", p.key.partition).
				Int64("offset", s.offset).Stringer("stalled_for", s.counted).Time("watermark_since", s.since).
				Stringer("stall_timeout", c.cfg.StallTimeout)
			if w != nil {
				ev = ev.Str("session", w.session).Int("attempts", attempt)
			}
			msg := "partition stalled: one record has held its watermark for StallTimeout (time this member's work was held not counted); "
			switch {
			case c.cfg.SkipStalled && c.park != nil && w != nil && !attemptRunning(w, l):
				msg += "its handler is not running (a retry wait, a park or dead-letter write): with parking on, its lane parks a failing record (Park.After, Park.AfterAttempts) and SkipStalled leaves it; see the partition's Health reasons"
			case c.cfg.SkipStalled && w != nil:
				msg += "SkipStalled dead-letters it (reason stalled) and the partition moves on"
			default:
				msg += "the partition waits for it: look at that session's handler (its error or why it does not return)"
			}
			ev.Msg(msg)
		}
		if c.cfg.SkipStalled && w != nil && c.dlq != nil && (c.park == nil || attemptRunning(w, l)) {
			c.skipStalled(bg, w, l)
		}
	}
}

// attemptRunning reports whether w, the record holding its partition, is
// in a handler attempt in lane l (a hung or slow handler). With parking on,
// SkipStalled skips only such a record: one failing between attempts is
// its lane's to park (Park.After, Park.AfterAttempts), with its session's
// order kept, rather than dead-lettered as stalled.
func attemptRunning(w *work, l *lane) bool {
	return l != nil && l.cur.Load() == w && l.since.Load() != 0
}

// holder finds the work holding p (sequence number seq): running or
// between attempts in a lane (a retry wait, its dead-letter or park
// write, a wait for the breaker or a silence hold, before its first
// attempt too), queued in one, or in a batch under way behind its head.
// attempt is 0 when it has not started, -1 when it is queued in a lane
// that sleeps (its session paused or throttled). The sequence number, not the
// offset, names it: after a log truncation a retired record may share the
// offset.
func (c *Consumer) holder(p *partition, seq uint64) (*work, *lane, int) {
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			if w := l.cur.Load(); w != nil && w.p == p && w.seq == seq {
				s.mu.Unlock()
				return w, l, int(l.attempt.Load())
			}
			if w := l.took; w != nil && w.p == p && w.seq == seq {
				s.mu.Unlock()
				return w, l, 0 // taken, not attempted yet
			}
			for _, w := range l.queue {
				if w.p == p && w.seq == seq {
					asleep := l.asleep != awake
					s.mu.Unlock()
					if asleep {
						return w, nil, -1 // its lane sleeps: paused or throttled (control.go)
					}
					return w, nil, 0
				}
			}
			for _, w := range l.held { // in a batch, behind its head
				if w.p == p && w.seq == seq {
					s.mu.Unlock()
					return w, nil, 0
				}
			}
		}
		s.mu.Unlock()
	}
	return nil, nil, 0
}

// skipStalled writes the stalled record to the DLQ with reason "stalled"
// and, once acknowledged, marks it done, so the partition moves on. It
// holds the record's claim: when its lane is writing a copy of its own,
// this check does nothing. The lane learns that its record is done: it
// makes no further attempt and takes the session's next message once the
// handler under way (if any) returns. A failed write is tried again at the
// next check.
func (c *Consumer) skipStalled(bg context.Context, w *work, l *lane) {
	if !w.claim.TryLock() {
		return
	}
	defer w.claim.Unlock()
	if w.p.isDone(w.seq) || c.held.Read(time.Now()).On != 0 {
		return // done meanwhile, or a hold began since the check: not a stall
	}
	attempt := 0
	if l != nil && l.cur.Load() == w {
		attempt = int(l.attempt.Load())
	}
	rec := c.dlq.record(w.rec, "stalled: watermark held past StallTimeout", ReasonStalled, attempt)
	ctx, cancel := context.WithTimeout(bg, c.cfg.CommitTimeout)
	defer cancel()
	if err := c.dlq.write(ctx, rec); err != nil {
		if bg.Err() != nil { // the shutdown began: the write was ended, it did not fail
			w.p.dlqCut(w.seq, w.rec.Offset, time.Now())
			return
		}
		c.stats.dlqFailures.Add(1)
		ev := c.log().Debug()
		if w.p.dlqFailure(w.seq, w.rec.Offset, err, time.Now()) {
			ev = c.log().Error() // once per record, like a lane's failed write
		}
		ev.Err(err).Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).Int64("offset", w.rec.Offset).
			Str("dlq", c.cfg.DeadLetterTopic).Msg("stalled record: dead-letter write failed; will retry at the next stall check")
		return
	}
	w.p.markDone(w.seq)
	c.stats.deadLettered(ReasonStalled)
	if l != nil {
		if ref := l.span.Load(); ref != nil && l.cur.Load() == w {
			ref.AddEvent(tracing.EventStallSkip, trace.WithAttributes(attribute.String("lanes.dlq.topic", c.cfg.DeadLetterTopic)))
		}
	}
	c.log().Warn().Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).Int64("offset", w.rec.Offset).
		Str("session", w.session).Msg("stalled record dead-lettered (SkipStalled); partition moves on")
}
