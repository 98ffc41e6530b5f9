package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
)

// A record given up to the dead-letter topic by its lane (deliver.go,
// batch.go): its copy written, retried for as long as the partition is
// ours, and the record marked done once the broker acknowledged it. The
// writer itself is deadletter.go.

// deadLetterTraced dead-letters w's record for reason, in the span of its
// last attempt, which failed with err (the caller ends the span). It
// reports whether the broker acknowledged the copy.
func (c *Consumer) deadLetterTraced(w *work, err error, reason Reason, span trace.Span) bool {
	done := c.deadLetter(w, &w.msg, err, reason, span)
	if done && span.IsRecording() {
		span.AddEvent(tracing.EventDeadLetter, trace.WithAttributes(
			attribute.String("lanes.dlq.reason", string(reason)), attribute.String("lanes.dlq.topic", c.cfg.DeadLetterTopic)))
	}
	return done
}

// deadLetter writes w's record to the DLQ and, once the broker acknowledged
// it, marks it done; with transactions, its copy becomes its input's only
// output instead, committed with its offset (tx_finish.go). It holds the
// record's claim, so the stall skipper never writes a second copy; a
// record the skipper finished first is left alone (false). A failed write
// is retried for as long as the partition is ours: progress is never
// bought with data. A retriable failure is retried with backoff; one that
// is not holds the partition, reported in Stats and the log, and is tried
// again every Retry.MaxInterval, until an operator acts (a dead-letter
// copy that cannot be written, in
// https://github.com/lanesdev/lanes/blob/main/docs/consumer.md).
func (c *Consumer) deadLetter(w *work, m *Message, cause error, reason Reason, span trace.Span) bool {
	w.claim.Lock()
	defer w.claim.Unlock()
	if w.p.isDone(w.seq) {
		return false // skipped as stalled: the skipper wrote its copy
	}
	rec := c.dlq.record(w.rec, cause.Error(), reason, m.Attempt)
	lg := c.recordLog(span, w) // every way out of the loop logs
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = c.cfg.Retry.InitialInterval
	bo.MaxInterval = c.cfg.Retry.MaxInterval
	bo.MaxElapsedTime = 0
	for {
		var err error
		if c.tx != nil { // its only output, committed with its offset (tx_finish.go)
			m.out.recs = append(m.out.recs[:0], rec)
			c.stampOutputs(w) // as every output: the error text is cut to make room for the stamps
			c.dlq.fit(rec)
			if err = c.fitsDead(w.rec, rec); err != nil {
				m.out.recs = m.out.recs[:0]
			}
		} else {
			ctx, cancel := context.WithTimeout(w.p.attempts, c.cfg.CommitTimeout)
			if err = c.dlq.write(ctx, rec); err == nil {
				w.p.markDone(w.seq) // also clears the partition's record of failed writes
			}
			cancel()
		}
		if err == nil {
			c.stats.deadLettered(reason)
			lg.Warn().Int("attempts", m.Attempt).Str("reason", string(reason)).AnErr("cause", cause).Bool("in_transaction", c.tx != nil).
				Msg("record dead-lettered")
			return true
		}
		if w.p.isFenced() {
			c.dlqGivenUp(w, &lg, err)
			return false
		}
		wait := c.reportDLQFailure(w, &lg, err)
		if retriable(err) {
			wait = bo.NextBackOff()
		}
		if !w.p.waitRetry(w.seq, wait) {
			return false
		}
	}
}

// fitsDead refuses rec, the dead-letter copy of in, to go into a
// transaction when it is larger than the dead-letter topic takes (its
// max.message.bytes read at Run, at most the group client's
// ProducerBatchMaxBytes: c.dlq.limit), or when the broker refused it for
// its size once already (a limit not read, or lowered, since Run): the
// broker would refuse it at every commit, aborting every transaction of
// the member. Refused here (MESSAGE_TOO_LARGE, not retriable), it holds
// its partition as without transactions. A copy's error text is cut to
// fit the limit with its stamps (deadLetters.fit): only a record whose
// key, value and headers alone come within some tens of bytes of it
// (parkwire.EncodedSize's bound) may be held though it would fit.
func (c *Consumer) fitsDead(in, rec *kgo.Record) error {
	size := parkwire.EncodedSize(rec)
	if size > c.dlq.limit {
		return fmt.Errorf("dead-letter copy of %d bytes is larger than %s takes, %d bytes (its max.message.bytes or kgo.ProducerBatchMaxBytes): %w",
			size, c.cfg.DeadLetterTopic, c.dlq.limit, kerr.MessageTooLarge)
	}
	if err := c.tx.refusals.deadTooLarge(in); err != nil {
		return fmt.Errorf("dead-letter copy of %d bytes refused by the broker for its size (%s's max.message.bytes could not be read at Run, or was lowered since: let the consumer read it, DESCRIBE_CONFIGS, and restart): %w",
			size, c.cfg.DeadLetterTopic, err)
	}
	return nil
}

// dlqGivenUp reports, in lg (the record's log), a failed DLQ write of w's
// record whose partition is being given up (revoked, lost, shutting down):
// no retry; the record is left undone, the shutdown names it in
// ErrUnfinished, and the partition's next owner runs it again.
func (c *Consumer) dlqGivenUp(w *work, lg *zerolog.Logger, err error) {
	if errors.Is(err, context.Canceled) { // ended by the revoke or shutdown: no failure
		w.p.dlqCut(w.seq, w.rec.Offset, time.Now())
		lg.Info().Str("dlq", c.cfg.DeadLetterTopic).
			Msg("dead-letter write ended by the revoke or shutdown before the broker answered: the record is left undone; its next owner runs it again")
		return
	}
	c.stats.dlqFailures.Add(1)
	w.p.dlqFailure(w.seq, w.rec.Offset, err, time.Now())
	lg.Warn().Err(err).Str("dlq", c.cfg.DeadLetterTopic).
		Msg("dead-letter write failed while the partition is given up (revoke or shutdown): the record is left undone; its next owner runs it again")
}

// reportDLQFailure counts and reports, in l (the record's log), a failed
// DLQ write of w's record, and returns the wait before the next try of a
// write that is not retriable.
func (c *Consumer) reportDLQFailure(w *work, l *zerolog.Logger, err error) time.Duration {
	c.stats.dlqFailures.Add(1)
	first := w.p.dlqFailure(w.seq, w.rec.Offset, err, time.Now())
	switch {
	case !retriable(err) && w.p.dlqBlocked(w.seq): // its first failure that is not retriable, after any that were
		c.stats.dlqBlocked.Add(1)
		l.Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Int("dlq_max_message_bytes", c.dlq.limit).
			Msg("dead-letter copy cannot be written (not retriable): partition held; see PartitionStats.DeadLetterError")
	case first:
		l.Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Msg("dead-letter write failed; retrying, partition held")
	default:
		l.Debug().Err(err).Msg("dead-letter write failed again")
	}
	return c.cfg.Retry.MaxInterval
}
