// Package hold measures the time during which a consumer member's work is
// held as a whole: a silence hold (a KIP-848 member cut off from its
// coordinator: running attempts cut, none started) or an open circuit
// breaker (fetching paused, lanes hold their records). The stall watch
// does not count held time as stalled time
// (https://github.com/lanesdev/lanes/blob/main/docs/observability.md).
//
// The holds' owners call Set when a hold begins and ends, under the lock
// that orders their own transitions; the stall watch calls Read. A Clock
// is safe for concurrent use; a nil Clock is never held.
package hold
