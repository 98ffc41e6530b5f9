package codec

import (
	"context"
	"encoding/json"
	"fmt"
)

// JSON returns a Codec that encodes a T with encoding/json. Decode rejects
// a payload that is not one JSON value of T's shape (syntax errors, a
// string where T has a number); fields T does not have are ignored, as
// encoding/json does.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(_ context.Context, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: json: %w", ErrEncode, err)
	}
	return b, nil
}

func (jsonCodec[T]) Decode(_ context.Context, payload []byte) (T, error) {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: json: %w", ErrDecode, err)
	}
	return v, nil
}
