// Package lanestest is the test kit for programs built on lanes: an
// embedded Kafka-compatible broker (kfake, in process) with topics, a
// [Ledger] that accounts for every message of a test (what the producer got
// acknowledged, every handler call, what the dead-letter topic holds) and
// reports order violations, overlapping calls of one session, losses,
// duplicates and dead-lettered records, and helpers that send through the
// lanes producer and run a lanes consumer until every sent message is
// accounted for.
//
// A test sends with [Ledger.Send] (or records acknowledgements itself with
// [Ledger.Sent]), wraps its handler with [Ledger.Handler], runs the consumer
// with [Run], reads the dead-letter topic with [ReadDeadLetters] and asserts
// [Report.Err] is nil. lanes' own integration suite and its demo use the same
// kit, on the embedded broker and on real Kafka.
//
// The package imports the lanes consumer and producer, so the consumer's own
// in-package tests cannot import it (an import cycle); external test packages
// can.
package lanestest
