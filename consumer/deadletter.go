package consumer

import (
	"context"
	"strconv"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// Headers lanes adds to a dead-lettered record, next to the original ones.
const (
	HeaderDLQTopic     = "lanes-dlq-topic"     // source topic
	HeaderDLQPartition = "lanes-dlq-partition" // source partition, decimal
	HeaderDLQOffset    = "lanes-dlq-offset"    // source offset, decimal
	HeaderDLQError     = "lanes-dlq-error"     // the last error, at most 1 KiB
	HeaderDLQAttempts  = "lanes-dlq-attempts"  // handler attempts made, decimal
	HeaderDLQReason    = "lanes-dlq-reason"    // one of the Reason constants
)

// Reasons written in the lanes-dlq-reason header.
const (
	// ReasonPermanent: the handler returned Permanent(err).
	ReasonPermanent = "permanent"
	// ReasonRetriesExhausted: the retry budget (attempts or time) is spent.
	ReasonRetriesExhausted = "retries-exhausted"
	// ReasonTimeout: the budget is spent and the last attempt hit
	// HandlerTimeout.
	ReasonTimeout = "timeout"
	// ReasonStalled: the record held its partition's watermark past
	// StallTimeout and SkipStalled is set.
	ReasonStalled = "stalled"
)

const maxErrorHeader = 1024

// dlqRecord builds the dead-letter copy of r: same key, value and headers,
// plus the lanes-dlq-* headers.
func dlqRecord(topic string, r *kgo.Record, errText, reason string, attempts int) *kgo.Record {
	if len(errText) > maxErrorHeader {
		errText = errText[:maxErrorHeader]
	}
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+6)
	h = append(h, r.Headers...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(errText)},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: h}
}

// deadLetter writes w's record to the DLQ and reports whether the broker
// acknowledged it. A failed write is retried with backoff for as long as
// the partition is ours: progress is never bought with data.
func (c *Consumer) deadLetter(w *work, m *Message, cause error, reason string, span trace.Span) bool {
	rec := dlqRecord(c.cfg.DeadLetterTopic, w.rec, cause.Error(), reason, m.Attempt)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = c.cfg.Retry.InitialInterval
	bo.MaxInterval = c.cfg.Retry.MaxInterval
	bo.MaxElapsedTime = 0
	for {
		ctx, cancel := context.WithTimeout(c.workCtx, c.cfg.CommitTimeout)
		err := c.client.ProduceSync(ctx, rec).FirstErr()
		cancel()
		if err == nil {
			c.stats.deadLettered(reason)
			l := c.recordLog(span, w)
			l.Warn().Int("attempts", m.Attempt).Str("reason", reason).AnErr("cause", cause).Msg("record dead-lettered")
			return true
		}
		c.stats.dlqFailures.Add(1)
		l := c.recordLog(span, w)
		l.Error().Err(err).Str("dlq", c.cfg.DeadLetterTopic).Msg("dead-letter write failed; retrying, partition held")
		if !sleep(w.p, bo.NextBackOff()) {
			return false
		}
	}
}
