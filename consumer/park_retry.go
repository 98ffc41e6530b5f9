package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// retryParked runs one retry of the parked head of w's session (w is a
// retry queued by the park loop, in the session's lane): on success a
// done marker; on failure a later retry, or, its budget spent, the DLQ and
// a hold or done marker (ParkPolicy.OnExhausted).
func (c *Consumer) retryParked(l *lane, w *work) {
	p := w.p
	if !p.startExtra() {
		return // fenced: the parked set goes with the assignment
	}
	defer p.finishExtra()
	if c.pausedNow(w) {
		p.parkAbandon(w.lane) // not due while it is paused (pausedIn); due at once when resumed
		return
	}
	h, ok := p.parkHead(w.lane)
	if !ok {
		p.parkAbandon(w.lane)
		return
	}
	src, inLane, err := c.readParked(p, h)
	if p.isFenced() { // meanwhile: start nothing more (the read may take a while)
		p.parkAbandon(w.lane)
		return
	}
	if errors.Is(err, errRecordGone) {
		c.parkLost(p, w.lane, h, err)
		return
	}
	if err != nil {
		// During an outage every due head fails so: one line per partition
		// per logRepeatEvery, with the count of the others.
		if ok, n := c.parkLog.allow(fmt.Sprintf("%s/%d", p.key.topic, p.key.partition), time.Now()); ok {
			c.log().Error().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("session", w.lane).
				Str("park_topic", c.park.topic(p.key.topic)).Int64("park_offset", h.ParkOffset).Int64("offset", h.SrcOffset).
				Int("suppressed", n).Msg("park: cannot read the parked record back for its retry; it is tried again after the park delay")
		}
		p.parkRetryLater(w.lane, time.Now())
		return
	}
	if c.parkedAway(p, w.lane, src) {
		p.parkRetryLater(w.lane, time.Now()) // not counted: its older records, parked on its old partition, go first
		return
	}
	rw := &work{rec: src, p: p, seq: parkSeq, session: c.parkedSessionOf(src), lane: w.lane, resource: c.parkedResourceOf(src)}
	if rw.session != w.lane && c.pausedNow(rw) {
		p.parkRetryLater(w.lane, time.Now()) // not counted: its record's session is paused (a lane shared by sessions)
		return
	}
	rw.msg = Message{Record: src, SessionID: rw.session, EventID: eventid.FromRecord(src), Group: c.cfg.Group,
		Attempt: inLane + h.Retries + 1} // counted across the hop: its attempts in its lane, then its retries from the park topic
	// The breaker holds a parked retry as any attempt: during an outage
	// that opened it, a parked head waits (or probes) instead of spending
	// its park budget, and a failure while it is open is excused.
	ps, ok := c.through(rw)
	if !ok {
		p.parkAbandon(w.lane)
		return
	}
	span, err := c.call(l, rw, &rw.msg)
	err, again := c.judged(p, ps, err)
	tracing.EndProcess(span, err)
	now := time.Now()
	switch {
	case err == nil:
		c.stats.processed.Add(1)
		c.parkMark(p, parkset.KindDone, w.lane, h.SrcOffset)
	case p.isFenced():
		p.parkAbandon(w.lane)
	case again: // not counted against the park budget: due again, to wait for the breaker or the hold
		c.stats.retries.Add(1)
		p.parkAbandon(w.lane)
	case IsPermanent(err): // poison, as it would be in the source partition: dead-lettered, the session goes on
		if c.parkDeadLetter(rw, err, permanentReason(err)) {
			c.parkMark(p, parkset.KindDone, w.lane, h.SrcOffset)
		}
	case !p.parkFailed(w.lane, now):
		c.stats.retries.Add(1)
		c.parkAttempted(p, w.lane, h)
	default:
		if !c.parkDeadLetter(rw, err, ReasonParkExhausted) {
			return
		}
		kind := parkset.KindDone
		if c.cfg.Park.OnExhausted == ParkHold {
			kind = parkset.KindHold
		}
		c.parkMark(p, kind, w.lane, h.SrcOffset)
	}
}

// parkAttempted writes the attempt marker of lane's head h after its
// failed retry (h.Retries+1 of them now): a rebuild after a hand-over or
// a restart keeps the budget spent and the backoff, instead of starting
// both again (with every parked head due at once). A write that fails
// until the partition is fenced loses only that count.
func (c *Consumer) parkAttempted(p *partition, lane string, h parkset.Record) {
	c.parkWrite(p, c.park.w.Attempt(p.key.topic, p.key.partition, lane, h.SrcOffset, p.parkEpoch(), h.Retries+1))
}

// parkLost handles parked head h of lane, deleted from the park topic and
// from its source partition before its retry (gone says how): nothing can
// retry it, so its loss is dead-lettered (ReasonParkLost: provenance, no
// content) and its session goes on, instead of staying parked for good.
func (c *Consumer) parkLost(p *partition, lane string, h parkset.Record, gone error) {
	r := &kgo.Record{Topic: p.key.topic, Partition: p.key.partition, Offset: h.SrcOffset,
		Headers: []kgo.RecordHeader{{Key: parkwire.HeaderSession, Value: []byte(lane)}}}
	w := &work{rec: r, p: p, seq: parkSeq, session: lane, lane: lane}
	w.msg.Attempt = h.Retries
	if !c.silenceWait(w) { // the partition may be another member's by now
		p.parkAbandon(lane)
		return
	}
	c.log().Error().Err(gone).Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("session", lane).
		Str("park_topic", c.park.topic(p.key.topic)).Int64("park_offset", h.ParkOffset).Int64("offset", h.SrcOffset).
		Msg("park: parked record deleted from the park topic and from its source partition (retention) before its retry: its loss is dead-lettered (reason park-lost) and its session goes on; keep both topics' retention longer than the longest park delay plus an outage")
	if c.parkDeadLetter(w, gone, ReasonParkLost) {
		c.parkMark(p, parkset.KindDone, lane, h.SrcOffset)
	}
}

// readParked reads the parked copy of head h back from its park partition
// and returns the source record it carries, as the handler is to see it,
// and the failed attempts it had in its lane before it was parked (0 when
// its copy is gone). A copy removed by retention is read from the source
// partition instead (the same record) while that one still has it; so is
// the record of a stub (readStub).
func (c *Consumer) readParked(p *partition, h parkset.Record) (*kgo.Record, int, error) {
	ctx, cancel := context.WithTimeout(p.attempts, c.cfg.CommitTimeout)
	defer cancel()
	ahead := p.parkAhead()
	r := ahead.Take(h.ParkOffset)
	if r == nil {
		var after []*kgo.Record
		var err error
		r, after, err = c.park.readAt(ctx, c.park.topic(p.key.topic), p.key.partition, h.ParkOffset)
		if errors.Is(err, errRecordGone) {
			src, err := c.readSource(ctx, p, h, err)
			return src, 0, err
		}
		if err != nil {
			return nil, 0, err
		}
		ahead.Keep(p.parkNeeded(after))
	}
	e, src, err := parkwire.Parse(r)
	if err == nil && (e.Kind != parkset.KindRecord || e.Src != h.SrcOffset || e.Group != c.cfg.Group) {
		// Another entry at its offset: the park topic was made again
		// while parked. The source partition still has the record.
		err = fmt.Errorf("%w: park topic %s/%d: the entry at %d is no parked copy of source offset %d",
			errRecordGone, r.Topic, r.Partition, h.ParkOffset, h.SrcOffset)
		src, err := c.readSource(ctx, p, h, err)
		return src, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("park topic %s/%d: %w", r.Topic, r.Partition, err)
	}
	if parkwire.IsStub(r) {
		src, err = c.readStub(ctx, p, h, src)
	}
	return src, parkwire.Attempts(r), err
}

// readSource reads parked head h from its source partition: its copy is
// gone from the park topic (gone says how).
func (c *Consumer) readSource(ctx context.Context, p *partition, h parkset.Record, gone error) (*kgo.Record, error) {
	src, _, err := c.park.readAt(ctx, p.key.topic, p.key.partition, h.SrcOffset)
	if err != nil {
		return nil, fmt.Errorf("parked copy gone from the park topic (%v), nor read from its source partition: %w", gone, err)
	}
	c.log().Warn().Err(gone).Str("topic", p.key.topic).Int32("partition", p.key.partition).Int64("offset", h.SrcOffset).
		Msg("park: parked copy not in the park topic; retried from its source partition: keep the park topic's retention longer than the longest park delay plus an outage, and do not make the topic again while sessions are parked")
	return src, nil
}

// parkedSessionOf is the session of a parked record about to be retried,
// computed as admit does: SessionKey one call at a time (Consumer.userMu).
func (c *Consumer) parkedSessionOf(r *kgo.Record) string {
	if c.cfg.SessionKey != nil {
		c.userMu.Lock()
		defer c.userMu.Unlock()
	}
	return strings.Clone(c.sessionOf(r))
}

// parkedResourceOf is the resource of a parked record about to be
// retried (Throttle.Resource), computed as admit does.
func (c *Consumer) parkedResourceOf(r *kgo.Record) string {
	if c.cfg.Throttle.Resource == nil {
		return ""
	}
	c.userMu.Lock()
	defer c.userMu.Unlock()
	return strings.Clone(c.cfg.Throttle.Resource(r))
}

// parkMark writes a done or hold marker of lane through source offset
// through and, once acknowledged, applies it. After a done marker the
// retry of the session's next parked head is queued at once, in its lane:
// a session catching up drains its parked records one after the other,
// not one per park loop tick, so it is unparked even while its producer
// keeps sending. Nothing is due after a hold marker.
func (c *Consumer) parkMark(p *partition, kind parkset.Kind, lane string, through int64) {
	off, ok := c.parkWrite(p, c.park.w.Marker(kind, p.key.topic, p.key.partition, lane, through, p.parkEpoch()))
	if ok && p.parkMarked(kind, lane, through, off, time.Now()) {
		c.queueParkRetry(p, lane)
	} else if ok && kind == parkset.KindDone && !p.stillParked(lane) { // the lane runs this: nothing parks it meanwhile
		c.logUnparked(p, lane, through)
	}
}

// parkDeadLetter writes a parked record whose budget is spent to the DLQ
// until acknowledged (true) or its partition is fenced (false).
func (c *Consumer) parkDeadLetter(w *work, cause error, reason Reason) bool {
	rec := c.dlq.record(w.rec, cause.Error(), reason, w.msg.Attempt)
	for {
		ctx, cancel := context.WithTimeout(w.p.attempts, c.cfg.CommitTimeout)
		err := c.dlq.write(ctx, rec)
		cancel()
		if err == nil {
			c.stats.deadLettered(reason)
			l := c.recordLog(noSpan, w)
			l.Warn().Int("attempts", w.msg.Attempt).Str("reason", string(reason)).AnErr("cause", cause).
				Msg("park: parked record dead-lettered")
			return true
		}
		if w.p.isFenced() || errors.Is(err, context.Canceled) {
			return false
		}
		c.stats.dlqFailures.Add(1)
		c.log().Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Msg("park: dead-letter write failed; retrying")
		if !w.p.waitRetry(parkSeq, c.cfg.Retry.MaxInterval) {
			return false
		}
	}
}

// readStub reads the record whose stub is parked head h (stub as parsed)
// from its source partition. A record gone from it, or another record at
// its offset (the source topic made again), is errRecordGone: its loss is
// dead-lettered (parkLost).
func (c *Consumer) readStub(ctx context.Context, p *partition, h parkset.Record, stub *kgo.Record) (*kgo.Record, error) {
	r, _, err := c.park.readAt(ctx, p.key.topic, p.key.partition, h.SrcOffset)
	if err != nil {
		return nil, fmt.Errorf("parked stub (park offset %d): read its record from %s/%d at %d: %w",
			h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset, err)
	}
	if !bytes.Equal(r.Key, stub.Key) {
		return nil, fmt.Errorf("%w: parked stub (park offset %d): %s/%d at %d holds a record of another key than the stub's: the topic was made again",
			errRecordGone, h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset)
	}
	return r, nil
}
