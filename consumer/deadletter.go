package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/clip"
	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// deadLetters writes dead-letter copies through a client of its own (a
// producer only), so its metadata follows the DLQ topic alone: a topic
// created after the consumer started is found within a metadata refresh.
// Its batches are capped at the topic's max.message.bytes, read when Run
// starts.
type deadLetters struct {
	topic  string
	limit  int // max.message.bytes of the topic (with transactions, at most the group client's ProducerBatchMaxBytes: its copies go through it)
	client *kgo.Client
}

// openDeadLetters starts the DLQ client; admin reads the topic's limit.
func openDeadLetters(ctx context.Context, cfg *Config, admin *kadm.Client) (*deadLetters, error) {
	d := &deadLetters{topic: cfg.DeadLetterTopic, limit: defaultMaxMessageBytes}
	if n, ok := maxMessageBytes(ctx, admin, d.topic); ok && n > recordOverhead {
		d.limit = n
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchMaxBytes(int32(d.limit)),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer: start dead-letter client: %w", err)
	}
	d.client = cl
	return d, nil
}

// maxMessageBytes is topic's max.message.bytes, as admin reads it (ok
// false: it could not).
func maxMessageBytes(ctx context.Context, admin *kadm.Client, topic string) (n int, ok bool) {
	rcs, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, false
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return 0, false
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			if n, err := strconv.Atoi(*c.Value); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// batchLimit is n, or cl's ProducerBatchMaxBytes when smaller: the
// largest batch cl sends (an output's, or a dead-letter copy's in a
// transaction).
func batchLimit(cl *kgo.Client, n int) int {
	if b, ok := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok {
		return min(n, int(b))
	}
	return n
}

// record builds the dead-letter copy of r: same key, value and headers,
// plus the lanes-dlq-* headers; its error text cut to fit (fit).
func (d *deadLetters) record(r *kgo.Record, errText string, reason Reason, attempts int) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+6)
	h = append(h, r.Headers...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
	)
	h = append(h, kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(errText)})
	rec := &kgo.Record{Topic: d.topic, Key: r.Key, Value: r.Value, Headers: h}
	d.fit(rec)
	return rec
}

// fit cuts the error text of rec, a copy record made, to clip.MaxError,
// and further so that rec fits d.limit as parkwire.EncodedSize bounds a
// batch holding it; again after headers were added to rec (a
// transaction's stamps, tx_finish.go), it makes room for them.
func (d *deadLetters) fit(rec *kgo.Record) {
	i := len(rec.Headers) - 1 // record's own is the last (an original may carry a copy's headers: a replayed dead letter)
	for i >= 0 && rec.Headers[i].Key != HeaderDLQError {
		i--
	}
	if i < 0 {
		return
	}
	text := rec.Headers[i].Value
	rec.Headers[i].Value = nil
	room := min(clip.MaxError, max(d.limit-parkwire.EncodedSize(rec), 0))
	rec.Headers[i].Value = []byte(clip.UTF8(string(text), room))
}

// write produces a copy of rec and waits for the broker's
// acknowledgement. A copy, because the client keeps the context of the
// first write in a record it is given (Record.Context): a record written
// again after a failed write would carry that write's cancelled context and
// fail at once, forever (a DLQ topic created after the consumer started
// was never written to).
//
// It returns when ctx ends even if the broker never answers: the
// idempotent producer does not give up on a request it sent, so a write
// that waited for the promise alone could hold a lane, a revoke's drain or
// the shutdown forever. A write abandoned that way may still land: the
// record's next try can then leave a second copy (at-least-once, like every
// write).
func (d *deadLetters) write(ctx context.Context, rec *kgo.Record) error {
	r := *rec
	done := make(chan error, 1)
	d.client.Produce(ctx, &r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close flushes what is buffered (bounded by ctx) and closes the client.
// With nothing buffered (every write is synchronous, so a clean shutdown
// leaves nothing) there is nothing to wait for: a ctx already spent, by
// the leave or a revoke's commit, is no error.
func (d *deadLetters) close(ctx context.Context) error {
	var err error
	if d.client.BufferedProduceRecords() > 0 {
		err = d.client.Flush(ctx)
	}
	d.client.Close()
	return err
}

// retriable tells a failed write worth trying again soon (a broker moving,
// a missing topic, a timeout) from one that fails the same way until an
// operator acts (a record too large for the topic, no authorization).
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}
