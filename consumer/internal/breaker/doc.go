// Package breaker is the consumer's circuit breaker as a state machine:
// closed ⇄ open, counted over a sliding window of ten buckets, one probe
// at a time while open, a probe running past its limit given up as hung
// (https://github.com/lanesdev/lanes/blob/main/docs/consumer.md#the-circuit-breaker).
//
// The consumer asks Allow before an attempt and tells Report after it,
// and acts on the Transition Report returns (the fetch hold, the log);
// the watchdog asks Idle. Time is passed in, so tests drive it; nothing
// here knows lanes, records or clients. A Breaker is safe for concurrent
// use: its state is under its own mutex, with the open flag, the waiting
// lanes and the idle release also kept as atomics for the lanes' fast
// path. The consumer's gate (consumer/gate.go) is its one door.
package breaker
