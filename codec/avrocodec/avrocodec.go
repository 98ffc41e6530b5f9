package avrocodec

import (
	"context"
	"errors"
	"fmt"

	"github.com/lanesdev/lanes/codec"
	"github.com/twmb/avro"
)

// ErrSchema is wrapped by New's error for a schema that does not parse.
var ErrSchema = errors.New("avrocodec: bad schema")

// Codec encodes and decodes a T with an Avro schema (the reader's schema,
// and the writer's for what it encodes). T is a struct with `avro` tags,
// a map[string]any, or any type twmb/avro maps to the schema. It is safe
// for concurrent use.
type Codec[T any] struct {
	schema *avro.Schema
	text   string
}

// New parses schema (Avro's JSON form) for T.
func New[T any](schema string) (*Codec[T], error) {
	s, err := avro.Parse(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return &Codec[T]{schema: s, text: schema}, nil
}

// Encode returns v's Avro binary encoding.
func (c *Codec[T]) Encode(_ context.Context, v T) ([]byte, error) { return c.AppendEncode(nil, v) }

// AppendEncode appends v's Avro binary encoding to b.
func (c *Codec[T]) AppendEncode(b []byte, v T) ([]byte, error) {
	out, err := c.schema.AppendEncode(b, &v)
	if err != nil {
		return nil, fmt.Errorf("%w: avro: %w", codec.ErrEncode, err)
	}
	return out, nil
}

// Decode reads payload, written with this codec's schema, into a new T.
// Bytes left over after the value are an error.
func (c *Codec[T]) Decode(_ context.Context, payload []byte) (T, error) {
	return decode[T](c.schema, payload)
}

func decode[T any](s *avro.Schema, payload []byte) (T, error) {
	var v T
	rest, err := s.Decode(payload, &v)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%d bytes left after the value", len(rest))
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%w: avro: %w", codec.ErrDecode, err)
	}
	return v, nil
}

// SchemaType is "AVRO", the schema registry's name of the format.
func (c *Codec[T]) SchemaType() string { return "AVRO" }

// WriterSchema is the schema New was given, registered by srcodec.
func (c *Codec[T]) WriterSchema() string { return c.text }

// MessageIndex is nil: Avro payloads carry no message index.
func (c *Codec[T]) MessageIndex() []int { return nil }

// Reader returns the decoder of payloads written with writerSchema: Avro
// schema resolution from the writer's schema to this codec's (the
// reader's). Fields the writer lacks take the reader's defaults, fields the
// reader lacks are skipped, promotable types are promoted. Schemas that do
// not resolve (a new field without a default, say) are an error.
func (c *Codec[T]) Reader(writerSchema string) (func([]byte) (T, error), error) {
	w, err := avro.Parse(writerSchema)
	if err != nil {
		return nil, fmt.Errorf("avrocodec: writer schema: %w", err)
	}
	r, err := avro.Resolve(w, c.schema)
	if err != nil {
		return nil, fmt.Errorf("avrocodec: writer schema does not resolve to the reader's: %w", err)
	}
	return func(b []byte) (T, error) { return decode[T](r, b) }, nil
}
