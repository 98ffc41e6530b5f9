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
