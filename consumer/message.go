package consumer

import (
	"context"

	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
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
