package protocodec_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/protocodec/internal/testpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTrip(t *testing.T) {
	var c codec.Codec[*testpb.Order] = protocodec.New[*testpb.Order]()
	ctx := context.Background()
	in := &testpb.Order{Id: "o-1", Total: 42, Items: []string{"tea", "milk"}}
	b, err := c.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Field 1 (id), wire type 2: tag 0x0a, length 3, "o-1"; field 2
	// (total), varint: tag 0x10, 42; field 3 twice.
	want := []byte{0x0a, 3, 'o', '-', '1', 0x10, 42, 0x1a, 3, 't', 'e', 'a', 0x1a, 4, 'm', 'i', 'l', 'k'}
	if !slices.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	out, err := c.Decode(ctx, b)
	if err != nil || !proto.Equal(out, in) {
		t.Fatalf("decoded %v, %v", out, err)
	}
	for _, bad := range [][]byte{{0xff, 0xff}, {0x0a, 9, 'x'}, {0x12}} {
		if _, err := c.Decode(ctx, bad); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("Decode(% x) = %v, want ErrDecode", bad, err)
		}
	}
}

func TestMessageIndex(t *testing.T) {
	if got := protocodec.New[*testpb.Order]().MessageIndex(); !slices.Equal(got, []int{0}) {
		t.Errorf("Order index %v, want [0]", got)
	}
	if got := protocodec.New[*testpb.Envelope_Line]().MessageIndex(); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("Envelope.Line index %v, want [1 0]", got)
	}
	c := protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.OrderProto))
	if c.SchemaType() != "PROTOBUF" || c.WriterSchema() != testpb.OrderProto {
		t.Errorf("schema type %q, schema %q", c.SchemaType(), c.WriterSchema())
	}
}
