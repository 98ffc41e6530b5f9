// Package parkahead keeps the parked copies that a read of a parked head
// brought along, so that a session draining its parked records finds its
// next heads in memory instead of asking the broker once per record
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#retries).
//
// A park partition's entries never change, so what is kept stays right.
// What a ReadAhead holds is bounded by MaxBytes, counted on copies of its
// own: a record decoded from a fetch points into the fetch's memory. It
// does no I/O; the consumer's park client reads, and says which of the
// records read are still needed.
package parkahead
