package srcodec_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/srcodec"
	"github.com/lanesdev/lanes/codec/srcodec/internal/testpb"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Avro through a schema registry (here franz-go's in-memory one): the
// first encode registers the schema under "users-value"; a reader with a
// newer schema reads it through Avro resolution.
func Example_avro() {
	reg := srfake.New()
	defer reg.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl, _ := sr.NewClient(sr.URLs(reg.URL()), sr.HTTPClient(&http.Client{Transport: tr}))

	type User struct {
		Name string `avro:"name"`
	}
	type UserV2 struct {
		Name  string `avro:"name"`
		Email string `avro:"email"`
	}
	v1, _ := avrocodec.New[User](`{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`)
	v2, _ := avrocodec.New[UserV2](`{"type":"record","name":"User","fields":[
		{"name":"name","type":"string"},{"name":"email","type":"string","default":"none"}]}`)
	writer, _ := srcodec.New(cl, srcodec.TopicSubject("users"), v1)
	reader, _ := srcodec.New(cl, srcodec.TopicSubject("users"), v2)

	ctx := context.Background()
	payload, err := writer.Encode(ctx, User{Name: "Al"}) // codec.Send(ctx, p, writer, session, u) sends it
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", payload)
	h := codec.Typed(reader, func(ctx context.Context, m *consumer.Message, u UserV2) error {
		fmt.Printf("%+v\n", u)
		return nil
	})
	_ = h.Handle(ctx, &consumer.Message{Record: &kgo.Record{Value: payload}})
	// Output:
	// 00 00 00 00 01 04 41 6c
	// {Name:Al Email:none}
}

// Protobuf through a schema registry: the .proto text is registered, the
// payload carries the message's index in it (00 for the first message).
func Example_protobuf() {
	reg := srfake.New()
	defer reg.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl, _ := sr.NewClient(sr.URLs(reg.URL()), sr.HTTPClient(&http.Client{Transport: tr}))

	orders, _ := srcodec.New(cl, srcodec.TopicSubject("orders"),
		protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.ShopProto)))
	ctx := context.Background()
	payload, err := orders.Encode(ctx, &testpb.Order{Id: "o-1", Total: 42})
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", payload)
	o, err := orders.Decode(ctx, payload)
	fmt.Println(o.GetId(), o.GetTotal(), err)
	// Output:
	// 00 00 00 00 01 00 0a 03 6f 2d 31 10 2a
	// o-1 42 <nil>
}
