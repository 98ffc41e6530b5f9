package consumer

import "slices"

// allReasons is every Reason the consumer writes in the lanes-dlq-reason
// header. TestReasonsListsEveryConstant fails when a Reason constant of
// the package is missing from it (or a value in it is no such constant).
var allReasons = []Reason{
	ReasonPermanent,
	ReasonDecode,
	ReasonRetriesExhausted,
	ReasonTimeout,
	ReasonStalled,
	ReasonParkExhausted,
	ReasonParkLost,
}

// Reasons returns every Reason the consumer writes in the lanes-dlq-reason
// header of a dead-lettered record, in a fixed order: the values a tool
// that filters dead letters by reason (lanes dlq replay --reason) accepts.
// The slice is the caller's.
func Reasons() []Reason { return slices.Clone(allReasons) }

// Valid reports whether r is one of the reasons the consumer writes.
func (r Reason) Valid() bool { return slices.Contains(allReasons, r) }

// Headers lanes adds to a dead-lettered record, next to the original ones.
const (
	HeaderDLQTopic     = "lanes-dlq-topic"     // source topic
	HeaderDLQPartition = "lanes-dlq-partition" // source partition, decimal
	HeaderDLQOffset    = "lanes-dlq-offset"    // source offset, decimal
	HeaderDLQError     = "lanes-dlq-error"     // the last error, at most 1 KiB
	HeaderDLQAttempts  = "lanes-dlq-attempts"  // handler attempts made, decimal
	HeaderDLQReason    = "lanes-dlq-reason"    // one of the Reason constants
)

// Reason says why a record was dead-lettered: the value of its
// lanes-dlq-reason header.
type Reason string

// Reasons written in the lanes-dlq-reason header.
const (
	// ReasonPermanent: the handler returned Permanent(err).
	ReasonPermanent Reason = "permanent"
	// ReasonDecode: the handler returned Undecodable(err): the payload
	// could not be decoded (see the codec module).
	ReasonDecode Reason = "decode"
	// ReasonRetriesExhausted: the retry budget (attempts or time) is spent.
	ReasonRetriesExhausted Reason = "retries-exhausted"
	// ReasonTimeout: the budget is spent and the last attempt hit
	// HandlerTimeout.
	ReasonTimeout Reason = "timeout"
	// ReasonStalled: the record held its partition's watermark past
	// StallTimeout and SkipStalled is set.
	ReasonStalled Reason = "stalled"
)

// ReasonParkExhausted: a parked record spent ParkPolicy.MaxAttempts.
const ReasonParkExhausted Reason = "park-exhausted"

// ReasonParkLost: a parked record was deleted from the park topic and from
// its source partition (retention) before it could be retried. Its
// dead-letter record has no key or value, only its provenance headers and
// its session (lanes-park-session).
const ReasonParkLost Reason = "park-lost"
