package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// ErrHandlerPanic is wrapped by the error a recovered handler panic becomes.
var ErrHandlerPanic = errors.New("consumer: handler panicked")

// deliver calls the handler for w until it succeeds, the retry budget is
// spent or the error is permanent (then the record goes to the DLQ), or the
// partition is fenced. It reports whether the record is done: handled, or
// durably dead-lettered.
func (c *Consumer) deliver(l *lane, w *work) bool {
	m := &w.msg
	*m = Message{Record: w.rec, SessionID: w.session, EventID: eventID(w.rec)}
	pol := c.cfg.Retry
	var bo backoff.BackOff // made on the first failure: most messages need none
	for attempt := 1; ; attempt++ {
		m.Attempt = attempt
		err := c.call(l, w, m)
		if err == nil {
			c.stats.processed.Add(1)
			return true
		}
		reason := c.giveUp(err, attempt)
		if bo == nil {
			bo = pol.backoff()
		}
		wait := bo.NextBackOff()
		if reason == "" && wait == backoff.Stop && !pol.Forever {
			reason = exhaustedReason(err)
		}
		if reason != "" {
			return c.deadLetter(w, m, err, reason)
		}
		if IsPermanent(err) {
			c.log().Error().Err(err).Str("topic", w.rec.Topic).Int32("partition", w.rec.Partition).
				Int64("offset", w.rec.Offset).Msg("permanent error with no dead-letter topic: retrying")
		}
		c.stats.retries.Add(1)
		if !sleep(w.p, wait) {
			return false
		}
	}
}

// giveUp returns the DLQ reason when err ends the retries at this attempt.
func (c *Consumer) giveUp(err error, attempt int) string {
	pol := c.cfg.Retry
	switch {
	case IsPermanent(err) && c.cfg.DeadLetterTopic != "":
		return ReasonPermanent
	case !pol.Forever && attempt >= pol.MaxAttempts:
		return exhaustedReason(err)
	}
	return ""
}

func exhaustedReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	return ReasonRetriesExhausted
}

// sleep waits d, or until the partition is fenced; it reports whether the
// full wait passed.
func sleep(p *partition, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.fence:
		return false
	}
}

// call runs one handler attempt under HandlerTimeout, turning a panic into
// an error. The watchdog reports an attempt that outlives its timeout.
func (c *Consumer) call(l *lane, w *work, m *Message) (err error) {
	now := time.Now()
	var ctx *attemptCtx
	if m.Attempt == 1 {
		ctx = &w.first
		ctx.init(c.workCtx, now, c.cfg.HandlerTimeout)
	} else {
		ctx = newAttemptCtx(c.workCtx, now, c.cfg.HandlerTimeout)
	}
	l.begin(w, m.Attempt, now)
	defer func() {
		l.end()
		ctx.release()
		if r := recover(); r != nil {
			c.stats.panics.Add(1)
			c.log().Error().Str("topic", m.Record.Topic).Int32("partition", m.Record.Partition).
				Int64("offset", m.Record.Offset).Str("session", m.SessionID).
				Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("handler panicked; treated as an error")
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return c.h.Handle(ctx, m)
}
