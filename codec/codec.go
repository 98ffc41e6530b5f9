package codec

import (
	"context"
	"errors"
	"fmt"

	"github.com/lanesdev/lanes/consumer"
)

// Codec turns a T into a payload and back. Implementations are safe for
// concurrent use. Decode wraps ErrDecode for a payload it can never decode
// and ErrUnavailable for a failure that may pass (a registry down); ctx
// bounds any call a codec makes (to a schema registry).
type Codec[T any] interface {
	Encode(ctx context.Context, v T) ([]byte, error)
	Decode(ctx context.Context, payload []byte) (T, error)
}

// Typed returns a consumer.Handler that decodes each message's value with
// c and calls h with the message and the decoded value.
//
// A decode failure is never retried: the handler returns
// consumer.Undecodable, and the record is dead-lettered at once with
// reason "decode", the error (naming the topic, partition and offset) in
// its lanes-dlq-error header. A failure that wraps ErrUnavailable, or one
// caused by ctx ending, is returned unmarked and retried like any handler
// error. h's own errors are returned as they are.
func Typed[T any](c Codec[T], h func(ctx context.Context, m *consumer.Message, v T) error) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		v, err := c.Decode(ctx, m.Record.Value)
		if err != nil {
			return decodeFailure(ctx, m, err)
		}
		return h(ctx, m, v)
	})
}

// decodeFailure classifies err, the failure to decode m's value.
func decodeFailure(ctx context.Context, m *consumer.Message, err error) error {
	r := m.Record
	err = fmt.Errorf("codec: decode %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	if errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
		return err
	}
	return consumer.Undecodable(err)
}
