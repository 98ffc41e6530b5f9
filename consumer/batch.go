package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"
)

// BatchHandlerFunc adapts a function to a BatchHandler.
type BatchHandlerFunc func(ctx context.Context, ms []*Message) error

// HandleBatch calls f(ctx, ms).
func (f BatchHandlerFunc) HandleBatch(ctx context.Context, ms []*Message) error { return f(ctx, ms) }

// BatchError is returned by a BatchHandler that finished only the first
// Done messages of its batch: message Done failed with Err. Return it as a
// pointer. A Done of len(ms) or more means the whole batch is done; a nil
// Err is treated as a retriable error.
type BatchError struct {
	Done int
	Err  error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("consumer: batch: first %d messages done, then: %v", e.Done, e.Err)
}

// Unwrap returns Err.
func (e *BatchError) Unwrap() error { return e.Err }

// errBatchIncomplete stands for a BatchError with no Err.
var errBatchIncomplete = errors.New("consumer: batch handler reported the batch unfinished, with no error")

// NewBatch is New for a BatchHandler: each lane hands h up to
// cfg.MaxBatch (default DefaultMaxBatch) of its session's messages that
// are already queued, never waiting for more. Order and the one-at-a-time
// rule hold across batches; failures follow BatchHandler's contract and
// the retry policy, counted for the first message not done. Middleware
// applies to Handler only: NewBatch rejects a Config with Middleware.
func NewBatch(cfg Config, h BatchHandler) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: handler: must not be nil", ErrConfig)
	}
	if len(cfg.Middleware) > 0 {
		return nil, fmt.Errorf("%w: Middleware: does not apply to a BatchHandler", ErrConfig)
	}
	if cfg.Park.Enabled {
		return nil, fmt.Errorf("%w: Park: not supported with a BatchHandler", ErrConfig)
	}
	if cfg.Transactions.Enabled {
		return nil, fmt.Errorf("%w: Transactions: not supported with a BatchHandler (use a Handler: each message's outputs commit with it)", ErrConfig)
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	c, err := build(cfg)
	if err != nil {
		return nil, err
	}
	c.bh = h
	c.lanes = newLaneSet(nil)
	c.gateLanes()
	c.lanes.batch, c.lanes.maxBatch = c.processBatch, cfg.MaxBatch
	c.makeShards()
	return c, nil
}

// processBatch starts the records a lane took (those fenced or skipped as
// stalled meanwhile drop out) and delivers them as one batch.
//
// A record whose session waits as moved by a growth of its topic
// (growth_loop.go) ends the batch before it: the records ahead of it are
// delivered, then it waits, and starts the next batch. With the records
// behind it, it is given back to its lane (back, as process) when the
// control gate may hold an older record of its session that arrived
// meanwhile, or, once released, itself.
func (c *Consumer) processBatch(l *lane, taken []*work) (back bool) {
	b := make([]*work, 0, len(taken))
	for i, w := range taken {
		c.retaken(w)
		if !w.p.start(w.seq) {
			continue
		}
		if wt := c.movedHold(w); wt != nil {
			c.deliverBatch(l, b)
			b = make([]*work, 0, len(taken))
			ok, back, _ := c.waitMoved(l, w, wt, func(x *work) bool { return c.processBatch(l, []*work{x}) }) // never parked: no parking with a BatchHandler
			if ok && !back && !c.freeNow(w) {
				w.moves, back = false, true // released, and the gate asks again
			}
			if back {
				c.giveBack(l, taken[i:])
				return true
			}
			if !ok {
				w.p.finish(w.seq, false) // fenced while its session waited: its next owner runs it
				continue
			}
		}
		w.msg = Message{Record: w.rec, SessionID: w.session, EventID: eventid.FromRecord(w.rec),
			Group: c.cfg.Group, Attempt: 1}
		b = append(b, w)
	}
	c.deliverBatch(l, b)
	return false
}

// deliverBatch calls the batch handler until every record of b is
// finished: done (handled, or dead-lettered as the head), or dropped (its
// partition fenced, or skipped as stalled). Each call gets the records not
// yet finished, in order; a failure counts as an attempt of the head, the
// first record not done, whose attempt number and backoff the retry policy
// uses, and which alone is dead-lettered when the policy gives up.
func (c *Consumer) deliverBatch(l *lane, b []*work) {
	var bo backoff.BackOff // the head's; made on its first failure
	excusedN := 0          // the head's failed attempts excused by the open breaker
	ms := make([]*Message, 0, len(b))
	var head0 *work // the head the budget above belongs to
	for {
		b = settle(b)
		if len(b) == 0 {
			return
		}
		if b[0] != head0 { // a new head (the old one done, fenced or skipped): a fresh budget
			head0, bo, excusedN = b[0], nil, 0
		}
		ps, ok := c.through(b[0])
		if !ok {
			continue // the head was fenced or skipped while held: settle drops it
		}
		if ps.waited {
			bo = nil // the budget by time starts again after an outage
		}
		ms = ms[:0]
		for _, w := range b {
			ms = append(ms, &w.msg)
		}
		span, err := c.callBatch(l, b[0], ms)
		c.endTurn(ps)
		done, cause := batchOutcome(err, len(b))
		cut, cause := c.silenced(cause, ps.holds)
		rep := cause
		if done > 0 {
			rep = nil // progress: the dependency answers
		}
		excused := c.brk != nil && c.breakerReport(b[0].p, ps.probe, rep)
		if done > 0 && c.brk != nil { // the new head's failure: the outage's when the breaker opened meanwhile
			excused = c.breakerExcuse(breakerOutcome(b[0].p, cause))
		}
		for _, w := range b[:done] {
			w.p.finish(w.seq, true)
		}
		c.stats.processed.Add(int64(done))
		if b = b[done:]; done > 0 {
			bo, excusedN = nil, 0
		}
		if len(b) == 0 {
			tracing.EndProcess(span, nil)
			return
		}
		if done > 0 { // the new head's budget starts with this call, whose failure is its own (or excused)
			head0 = b[0]
		}
		head := b[0]
		if head.p.isDone(head.seq) || head.p.isFenced() {
			tracing.EndProcess(span, cause)
			continue // skipped as stalled, or given up, while the call ran: settle drops it
		}
		if excused || cut {
			c.stats.retries.Add(1)
			tracing.EndProcess(span, cause)
			head.msg.Attempt++
			excusedN++
			bo = nil
			continue // the breaker is open, or the member holds its work: the next pass waits
		}
		v := c.failed(cause, head.msg.Attempt-excusedN, &bo)
		if v.step == stepDead {
			done := c.deadLetterTraced(head, cause, v.reason, span)
			tracing.EndProcess(span, cause)
			head.p.finish(head.seq, done)
			b, bo, excusedN = b[1:], nil, 0
			continue
		}
		c.retrying(head, cause, v, span)
		tracing.EndProcess(span, cause)
		head.msg.Attempt++
		head.p.waitRetry(head.seq, v.wait) // fenced or skipped meanwhile: settle drops it
	}
}

// batchOutcome reads a batch call's error: how many of its n first
// messages are done, and the error of the first one not done.
func batchOutcome(err error, n int) (done int, cause error) {
	if err == nil {
		return n, nil
	}
	var be *BatchError
	if !errors.As(err, &be) {
		return 0, err
	}
	done = min(max(be.Done, 0), n)
	if be.Err == nil {
		return done, errBatchIncomplete
	}
	return done, be.Err
}

// settle finishes, as not done, the records of b whose partition is fenced
// (the next owner runs them) or that were skipped as stalled, and returns
// the others, in order, in b's array.
func settle(b []*work) []*work {
	keep := b[:0]
	for _, w := range b {
		if w.p.isFenced() || w.p.isDone(w.seq) {
			w.p.finish(w.seq, false)
			continue
		}
		keep = append(keep, w)
	}
	clear(b[len(keep):])
	return keep
}

// callBatch runs one batch handler call, as call does for one record: under
// HandlerTimeout, inside the head's process span, with the head as the
// lane's current work for the watchdog, turning a panic into an error.
func (c *Consumer) callBatch(l *lane, head *work, ms []*Message) (span trace.Span, err error) {
	start := stampNow()
	actx := newAttemptCtx(head.p.attempts, start, c.cfg.HandlerTimeout)
	var ctx context.Context = actx
	span = noSpan
	if c.tracer.Enabled() {
		ctx, span = c.tracer.StartProcess(actx, head.rec, tracing.Process{Group: c.cfg.Group, SessionID: head.session,
			EventID: head.msg.EventID, Attempt: head.msg.Attempt, AsChild: c.cfg.TraceAsChild})
		span.SetAttributes(attribute.Int("lanes.batch.size", len(ms)))
	}
	l.begin(head, head.msg.Attempt, start, span)
	c.track(l, actx)
	defer func() {
		l.end()
		actx.release()
		c.metrics.handlerDone(ctx, start)
		if r := recover(); r != nil {
			c.stats.panics.Add(1)
			lg := c.recordLog(span, head)
			lg.Error().Int("attempt", head.msg.Attempt).Int("batch", len(ms)).Str("panic", fmt.Sprint(r)).
				Bytes("stack", debug.Stack()).Msg("batch handler panicked; treated as an error")
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return span, c.bh.HandleBatch(ctx, ms)
}
