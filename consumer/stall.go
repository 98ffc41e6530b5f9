package consumer

import (
	"context"
	"time"

	"github.com/lanesdev/lanes/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// checkStalls reports partitions whose watermark has not moved for
// StallTimeout while a record holds it, and with SkipStalled dead-letters
// that record so the partition moves on. It runs on the watchdog goroutine;
// the hot path pays nothing for it (the watchdog samples watermarks).
func (c *Consumer) checkStalls(now time.Time) {
	for _, p := range c.ownedAll() {
		p.mu.Lock()
		wm := p.tr.watermark()
		if wm != p.lastWM || p.tr.pending() == 0 {
			p.lastWM, p.movedAt, p.stalled = wm, now, false
			p.mu.Unlock()
			continue
		}
		held, _ := p.tr.heldBy()
		fresh := !p.stalled && now.Sub(p.movedAt) >= c.cfg.StallTimeout
		if fresh {
			p.stalled = true
		}
		stalled := p.stalled
		p.mu.Unlock()
		if !stalled {
			continue
		}
		w, l, attempt := c.holder(p, held)
		if fresh {
			c.stats.stalls.Add(1)
			ev := c.log().Warn().Str("topic", p.key.topic).Int32("partition", p.key.partition).
				Int64("offset", held).Dur("stalled_for", now.Sub(p.movedAt))
			if w != nil {
				ev = ev.Str("session", w.session).Int("attempts", attempt)
			}
			ev.Msg("partition stalled: its watermark has not moved for StallTimeout")
		}
		if c.cfg.SkipStalled && w != nil && c.cfg.DeadLetterTopic != "" {
			c.skipStalled(p, w, l, attempt)
		}
	}
}

// holder finds the work holding p at offset held: running or retrying in a
// lane, or queued in one. attempt is 0 when it has not started.
func (c *Consumer) holder(p *partition, held int64) (*work, *lane, int) {
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			if w := l.cur.Load(); w != nil && w.p == p && w.rec.Offset == held {
				s.mu.Unlock()
				return w, l, int(l.attempt.Load())
			}
			for _, w := range l.queue {
				if w.p == p && w.rec.Offset == held {
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
// and, once acknowledged, counts its offset done. A failed write is tried
// again at the next check. The lane keeps waiting for a running handler.
func (c *Consumer) skipStalled(p *partition, w *work, l *lane, attempt int) {
	rec := dlqRecord(c.cfg.DeadLetterTopic, w.rec, "stalled: watermark held past StallTimeout", ReasonStalled, attempt)
	ctx, cancel := context.WithTimeout(c.workCtx, c.cfg.CommitTimeout)
	defer cancel()
	if err := c.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		c.stats.dlqFailures.Add(1)
		c.log().Error().Err(err).Int64("offset", w.rec.Offset).Msg("stalled record: dead-letter write failed; will retry")
		return
	}
	p.mu.Lock()
	if !p.fenced {
		p.tr.done(w.seq)
	}
	p.mu.Unlock()
	c.stats.deadLettered(ReasonStalled)
	if l != nil {
		if ref := l.span.Load(); ref != nil && l.cur.Load() == w {
			ref.AddEvent(tracing.EventStallSkip, trace.WithAttributes(attribute.String("lanes.dlq.topic", c.cfg.DeadLetterTopic)))
		}
	}
	c.log().Warn().Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).Int64("offset", w.rec.Offset).
		Str("session", w.session).Msg("stalled record dead-lettered (SkipStalled); partition moves on")
}
