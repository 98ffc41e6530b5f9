package avrocodec_test

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A typed handler of Avro records; codec.Send(ctx, p, users, session, u)
// sends one.
func Example() {
	type User struct {
		Name string `avro:"name"`
		Age  int32  `avro:"age"`
	}
	users, err := avrocodec.New[User](`{"type":"record","name":"User","fields":[
		{"name":"name","type":"string"},{"name":"age","type":"int"}]}`)
	if err != nil {
		panic(err)
	}
	h := codec.Typed(users, func(ctx context.Context, m *consumer.Message, u User) error {
		fmt.Println(m.SessionID, u.Name, u.Age)
		return nil
	})
	payload, _ := users.Encode(context.Background(), User{Name: "Al", Age: 30})
	fmt.Printf("% x\n", payload)
	_ = h.Handle(context.Background(), &consumer.Message{SessionID: "user-1", Record: &kgo.Record{Value: payload}})
	// Output:
	// 04 41 6c 3c
	// user-1 Al 30
}
