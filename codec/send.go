package codec

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/producer"
)

// Send encodes v with c and sends it as one message of sessionID through
// p, waiting for the broker's acknowledgement (see producer.Producer.Send).
// An encode failure is returned before anything is sent; it wraps ErrEncode,
// or ErrUnavailable when a schema registry could not be reached to
// register v's schema (try again later).
func Send[T any](ctx context.Context, p *producer.Producer, c Codec[T], sessionID string, v T, opts ...producer.SendOption) (producer.Result, error) {
	b, err := c.Encode(ctx, v)
	if err != nil {
		return producer.Result{}, fmt.Errorf("codec: send %s: %w", sessionID, err)
	}
	return p.Send(ctx, sessionID, b, opts...)
}

// SendAsync is Send without waiting: done (which may be nil) is called
// exactly once, with the encode failure at once or with the send's result
// from the producer (see producer.Producer.SendAsync). Encoding happens in
// the caller's goroutine, so values of one session sent by one goroutine
// keep their call order.
func SendAsync[T any](ctx context.Context, p *producer.Producer, c Codec[T], sessionID string, v T, done func(producer.Result, error), opts ...producer.SendOption) {
	b, err := c.Encode(ctx, v)
	if err != nil {
		if done != nil {
			done(producer.Result{}, fmt.Errorf("codec: send %s: %w", sessionID, err))
		}
		return
	}
	p.SendAsync(ctx, sessionID, b, done, opts...)
}
