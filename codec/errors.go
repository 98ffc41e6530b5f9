package codec

import "errors"

// Errors codecs wrap and callers branch on.
var (
	// ErrDecode is wrapped by a codec's error for a payload it cannot
	// decode (bad framing, bytes that do not match the type or schema, an
	// unknown schema ID). Typed dead-letters such a record with reason
	// "decode".
	ErrDecode = errors.New("codec: cannot decode payload")
	// ErrEncode is wrapped by a codec's error for a value it cannot encode.
	ErrEncode = errors.New("codec: cannot encode value")
	// ErrUnavailable is wrapped by a codec's error that may pass if tried
	// again: a schema registry that cannot be reached or answers with a
	// server error. Typed returns it unmarked, so the consumer retries it.
	ErrUnavailable = errors.New("codec: schema registry unavailable")
)
