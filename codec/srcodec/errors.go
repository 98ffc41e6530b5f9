package srcodec

import "errors"

// Errors callers branch on; each is wrapped together with codec.ErrDecode,
// codec.ErrEncode or codec.ErrUnavailable.
var (
	// ErrConfig is wrapped by New's error for a bad argument.
	ErrConfig = errors.New("srcodec: bad config")
	// ErrUnknownSchema: the registry has no schema with the payload's ID
	// (a decode failure: the record is dead-lettered).
	ErrUnknownSchema = errors.New("srcodec: schema ID unknown to the registry")
	// ErrHeader: the payload does not start with the wire format's header
	// (magic byte 0, 4-byte schema ID, protobuf message indexes).
	ErrHeader = errors.New("srcodec: no schema-registry header")
)
