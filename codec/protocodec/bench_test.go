package protocodec_test

import (
	"context"
	"testing"

	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/protocodec/internal/testpb"
)

// BenchmarkDecode: one record's decode.
func BenchmarkDecode(b *testing.B) {
	c := protocodec.New[*testpb.Order]()
	ctx := context.Background()
	payload, _ := c.Encode(ctx, &testpb.Order{Id: "order-000042", Total: 123456, Items: []string{"tea", "milk", "bread"}})
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
}
