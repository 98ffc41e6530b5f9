package avrocodec_test

import (
	"context"
	"testing"

	"github.com/lanesdev/lanes/codec/avrocodec"
)

const orderSchema = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"string"},{"name":"total","type":"long"},
	{"name":"items","type":{"type":"array","items":"string"}}]}`

const orderSchemaV2 = `{"type":"record","name":"Order","fields":[
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

// BenchmarkDecode: one record's decode with the writer's own schema.
func BenchmarkDecode(b *testing.B) {
	c, _ := avrocodec.New[benchOrder](orderSchema)
	ctx := context.Background()
	payload, _ := c.Encode(ctx, benchOrder{ID: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}})
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResolved: the same record read by a newer reader schema
// (one field added with a default) through Avro resolution.
func BenchmarkDecodeResolved(b *testing.B) {
	w, _ := avrocodec.New[benchOrder](orderSchema)
	r, _ := avrocodec.New[benchOrderV2](orderSchemaV2)
	payload, _ := w.Encode(context.Background(), benchOrder{ID: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}})
	dec, err := r.Reader(orderSchema)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec(payload); err != nil {
			b.Fatal(err)
		}
	}
}
