package protocodec

import (
	"context"
	"fmt"
	"slices"

	"github.com/lanesdev/lanes/codec"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec encodes and decodes a generated protobuf message type T (a
// pointer, such as *orderpb.Order). It is safe for concurrent use.
type Codec[T proto.Message] struct {
	msg    protoreflect.MessageType
	schema string
	index  []int
}

// Option configures a Codec.
type Option func(*options)

type options struct{ schema string }

// WithSchema sets the text of the .proto file that declares T (for
// example embedded with go:embed): the schema srcodec registers on the
// first send. Without it the codec still encodes and decodes plain
// protobuf; srcodec refuses to register a schema it does not have.
func WithSchema(protoText string) Option { return func(o *options) { o.schema = protoText } }

// New returns the Codec of T.
func New[T proto.Message](opts ...Option) *Codec[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var zero T
	mt := zero.ProtoReflect().Type()
	return &Codec[T]{msg: mt, schema: o.schema, index: messageIndex(mt.Descriptor())}
}

// messageIndex is the path of md in its file: the index of its top-level
// message, then of each nested message down to md (Confluent's message
// indexes).
func messageIndex(md protoreflect.MessageDescriptor) []int {
	var idx []int
	var d protoreflect.Descriptor = md
	for {
		m, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		idx = append(idx, m.Index())
		d = m.Parent()
	}
	slices.Reverse(idx)
	return idx
}

// Encode marshals v.
func (c *Codec[T]) Encode(_ context.Context, v T) ([]byte, error) { return c.AppendEncode(nil, v) }

// Decode unmarshals payload into a new T. Fields T does not know are kept
// as unknown fields, as protobuf does.
func (c *Codec[T]) Decode(_ context.Context, payload []byte) (T, error) { return c.decode(payload) }

func (c *Codec[T]) decode(payload []byte) (T, error) {
	m := c.msg.New().Interface().(T)
	if err := proto.Unmarshal(payload, m); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: protobuf %s: %w", codec.ErrDecode, c.msg.Descriptor().FullName(), err)
	}
	return m, nil
}

// AppendEncode appends v's protobuf encoding to b.
func (c *Codec[T]) AppendEncode(b []byte, v T) ([]byte, error) {
	out, err := proto.MarshalOptions{}.MarshalAppend(b, v)
	if err != nil {
		return nil, fmt.Errorf("%w: protobuf %s: %w", codec.ErrEncode, c.msg.Descriptor().FullName(), err)
	}
	return out, nil
}

// SchemaType is "PROTOBUF", the schema registry's name of the format.
func (c *Codec[T]) SchemaType() string { return "PROTOBUF" }

// WriterSchema is the .proto text given with WithSchema ("" without it).
func (c *Codec[T]) WriterSchema() string { return c.schema }

// MessageIndex is T's path in its .proto file: the index of its top-level
// message, then of each nested message ([0] for the file's first message).
func (c *Codec[T]) MessageIndex() []int { return slices.Clone(c.index) }

// Reader returns the decoder of payloads written with writerSchema.
// Protobuf's field numbers carry its evolution, so any writer's bytes are
// read into T the same way: fields T lacks are kept as unknown, fields the
// writer lacked stay at their zero value.
func (c *Codec[T]) Reader(string) (func([]byte) (T, error), error) { return c.decode, nil }
