package protocodec_test

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/protocodec/internal/testpb"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A typed handler of a generated protobuf message; codec.Send(ctx, p,
// orders, session, msg) sends one.
func Example() {
	orders := protocodec.New[*testpb.Order]()
	h := codec.Typed(orders, func(ctx context.Context, m *consumer.Message, o *testpb.Order) error {
		fmt.Println(m.SessionID, o.GetId(), o.GetTotal(), o.GetItems())
		return nil
	})
	payload, _ := orders.Encode(context.Background(), &testpb.Order{Id: "o-1", Total: 42, Items: []string{"tea"}})
	fmt.Printf("% x\n", payload)
	_ = h.Handle(context.Background(), &consumer.Message{SessionID: "cart-7", Record: &kgo.Record{Value: payload}})
	// Output:
	// 0a 03 6f 2d 31 10 2a 1a 03 74 65 61
	// cart-7 o-1 42 [tea]
}
