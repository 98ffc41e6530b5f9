package codec_test

import (
	"context"
	"testing"

	"github.com/lanesdev/lanes/codec"
)

type benchOrder struct {
	ID    string   `json:"id"`
	Total int64    `json:"total"`
	Items []string `json:"items"`
}

// BenchmarkDecodeJSON: one record's decode, the same order every codec's
// benchmark decodes
// (https://github.com/lanesdev/lanes/blob/main/docs/benchmarks.md#codecs).
func BenchmarkDecodeJSON(b *testing.B) {
	c := codec.JSON[benchOrder]()
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
