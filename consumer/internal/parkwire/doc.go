// Package parkwire is the park topic's wire format: the lanes-park-*
// headers, the entries a consumer group writes to a park partition (a
// parked copy, done, hold, attempt, fence and release markers; Writer),
// how one is read back (Parse), and how a copy is made to fit its park
// topic's max.message.bytes, down to a stub (Limits, Fit)
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#topic-layout).
//
// It does no I/O: the consumer's park client writes and reads the records
// it builds and parses. What an entry means for the parked set, and which
// entries are in force, is package parkset's.
package parkwire
