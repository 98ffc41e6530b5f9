package srcodec_test

import (
	"context"
	"testing"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/srcodec"
	"github.com/lanesdev/lanes/codec/srcodec/internal/testpb"
)

const benchSchema = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"string"},{"name":"total","type":"long"},
	{"name":"items","type":{"type":"array","items":"string"}}]}`

const benchSchemaV2 = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"string"},{"name":"total","type":"long"},
	{"name":"items","type":{"type":"array","items":"string"}},
	{"name":"note","type":"string","default":""}]}`

type benchOrder struct {
	ID    string   `avro:"id"`
	Total int64    `avro:"total"`
	Items []string `avro:"items"`
}

type benchOrderV2 struct {
	ID    string   `avro:"id"`
	Total int64    `avro:"total"`
	Items []string `avro:"items"`
	Note  string   `avro:"note"`
}

// benchDecode decodes payload with c in a loop, after a first decode that
// fetched the writer's schema: the cost per record once the schema is
// cached.
func benchDecode[T any](b *testing.B, c codec.Codec[T], payload []byte) {
	ctx := context.Background()
	if _, err := c.Decode(ctx, payload); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAvro(b *testing.B) {
	_, cl := newRegistry(b)
	c := must(srcodec.New(cl, "orders-value", must(avrocodec.New[benchOrder](benchSchema))))
	payload := must(c.Encode(context.Background(), benchOrder{ID: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}}))
	benchDecode(b, c, payload)
}

// BenchmarkDecodeAvroEvolved: v1 data, v2 reader (resolution).
func BenchmarkDecodeAvroEvolved(b *testing.B) {
	_, cl := newRegistry(b)
	w := must(srcodec.New(cl, "orders-value", must(avrocodec.New[benchOrder](benchSchema))))
	r := must(srcodec.New(cl, "orders-value", must(avrocodec.New[benchOrderV2](benchSchemaV2))))
	payload := must(w.Encode(context.Background(), benchOrder{ID: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}}))
	benchDecode(b, r, payload)
}

func BenchmarkDecodeProtobuf(b *testing.B) {
	_, cl := newRegistry(b)
	c := must(srcodec.New(cl, "orders-value", protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.ShopProto))))
	payload := must(c.Encode(context.Background(), &testpb.Order{Id: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}}))
	benchDecode(b, c, payload)
}
