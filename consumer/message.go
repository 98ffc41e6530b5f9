package consumer

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// Message is one record handed to a Handler. It stays valid after Handle
// returns: lanes never reuses it for another record, so a handler may keep
// it. A retry of the same record is handed the same Message, its Attempt
// increased.
type Message struct {
	// Record is the Kafka record: topic, partition, offset, key, value,
	// headers, timestamp. Handlers must not modify it.
	Record *kgo.Record
	// SessionID is the record's session: by default its key; "" for a
	// record with a nil key.
	SessionID string
	// EventID is the value of the lanes-event-id header; "" when absent.
	// It is not validated: use eventid.Parse to check it.
	EventID string
	// Group is the consumer group that received it (Config.Group).
	Group string
	// Attempt is 1 on the first delivery to the handler and grows by one
	// on each retry. A parked record's (Config.Park) goes on counting from
	// the park topic: its attempts in its lane, plus its failed retries
	// from the park topic, plus one (a record forwarded behind its parked
	// session had none in its lane). In a batch (NewBatch) it is 1 plus
	// the failed calls in which the message was the first one not done.
	Attempt int

	// out holds the outputs (Config.Transactions; nil without: Output
	// is refused), apart, so that a message without them stays small.
	out *outputs
}

// outputs are the records an attempt's handler gave Output, and the
// trace context of the attempt that made them.
type outputs struct {
	recs []*kgo.Record
	span trace.SpanContext
	// refused is the permanent failure of every attempt at the message:
	// an output of its was refused for ever (tx_refused.go); nil: none.
	refused error
}

// Output adds r to the message's outputs (Config.Transactions): produced
// in the Kafka transaction that commits the message's offset, so a
// read_committed reader sees them exactly when the message counts as
// handled, all of them or none, once. r.Topic is required; r.Key places
// r on its topic's partitions (TransactionPolicy.Outputs): outputs keyed
// by the session keep the session's input order on one partition.
//
// Outputs wait in memory until the handler returns: an attempt that fails
// drops the outputs it added, and the next attempt adds its own; a
// message dead-lettered has its dead-letter copy as its only output. Call
// Output from the handler's goroutine, before it returns, and do not
// change r afterwards. Without Config.Transactions it returns
// ErrNotTransactional. When an output of this message was refused for
// its size in two earlier attempts (larger than its topic's
// max.message.bytes or the producer's ProducerBatchMaxBytes), it returns
// a Permanent error saying so, and the attempt fails with it whatever the
// handler returns: the message is dead-lettered instead of aborting every
// transaction.
func (m *Message) Output(r *kgo.Record) error {
	switch {
	case m.out == nil:
		return ErrNotTransactional
	case r == nil || r.Topic == "":
		return fmt.Errorf("consumer: Output: the record needs a topic (Record.Topic)")
	case m.out.refused != nil:
		return m.out.refused
	}
	m.out.recs = append(m.out.recs, r)
	return nil
}

// Handler processes messages. Handle is called for one message of a session
// at a time, in partition-offset order; calls for different sessions run
// concurrently. Return nil on success, an error to retry with backoff, or
// Permanent(err) (or Undecodable(err) for a payload that cannot be decoded)
// to send the message straight to the dead-letter topic.
// Handle must honour ctx: it is cancelled at HandlerTimeout and on hard
// shutdown.
type Handler interface {
	Handle(ctx context.Context, m *Message) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, m *Message) error

// Handle calls f(ctx, m).
func (f HandlerFunc) Handle(ctx context.Context, m *Message) error { return f(ctx, m) }

// BatchHandler processes messages a batch at a time (see NewBatch).
// HandleBatch receives 1 to Config.MaxBatch consecutive messages of one
// session, in order; calls for one session never overlap, calls for
// different sessions run concurrently. It returns nil when every message is
// done; &BatchError{Done: n, Err: err} when the first n are done and
// message n failed with err; any other error when none is done (the whole
// batch is retried). Permanent(err), alone or as a BatchError's Err, sends
// the first message not done to the dead-letter topic. HandleBatch must
// honour ctx: it is cancelled at HandlerTimeout and on hard shutdown.
type BatchHandler interface {
	HandleBatch(ctx context.Context, ms []*Message) error
}

// placementOf is r's placement header's value (nil: none).
func placementOf(r *kgo.Record) []byte {
	for i := range r.Headers {
		if r.Headers[i].Key == hashring.HeaderPlacement {
			return r.Headers[i].Value
		}
	}
	return nil
}

// HeaderInput and HeaderOutput are set on every output of a transactional
// pipeline (Message.Output): the input it answers, as
// "topic/partition@offset", and its place among that input's outputs, as
// "k/n" (k from 0). A read_committed reader can so count every input's
// outputs (lanestest.ReadOutputs does). A dead-letter copy carries them
// too.
const (
	HeaderInput  = "lanes-input"
	HeaderOutput = "lanes-output"
)
