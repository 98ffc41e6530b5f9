package codec_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A typed handler: the consumer hands it decoded orders; a payload that is
// not an order is dead-lettered with reason "decode", never retried. With a
// producer, codec.Send(ctx, p, orders, session, v) encodes and sends.
func ExampleTyped() {
	type Order struct {
		ID    string `json:"id"`
		Total int    `json:"total"`
	}
	orders := codec.JSON[Order]()
	h := codec.Typed(orders, func(ctx context.Context, m *consumer.Message, o Order) error {
		fmt.Printf("session %s: order %s, total %d\n", m.SessionID, o.ID, o.Total)
		return nil
	})

	payload, _ := orders.Encode(context.Background(), Order{ID: "o-1", Total: 42})
	fmt.Printf("%s\n", payload)
	ctx := context.Background()
	_ = h.Handle(ctx, &consumer.Message{SessionID: "cart-7", Record: &kgo.Record{Topic: "orders", Value: payload}})
	err := h.Handle(ctx, &consumer.Message{SessionID: "cart-7", Record: &kgo.Record{Topic: "orders", Offset: 1, Value: []byte("{oops")}})
	fmt.Println(consumer.IsPermanent(err), errors.Is(err, codec.ErrDecode))
	// Output:
	// {"id":"o-1","total":42}
	// session cart-7: order o-1, total 42
	// true true
}
