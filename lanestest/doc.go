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
// [Ledger.Acked]), wraps its handler with [Ledger.Handler] (or, for a service
// that builds its own consumer, adds [Ledger.Middleware] to its middleware
// list), runs the consumer or the service with [Run], reads the dead-letter
// topic with [ReadDeadLetters] and asserts [Report.Err] is nil.
//
// With deduplication (module dedup), the ledger goes inside it: list the
// dedup middleware first and the ledger's after it, so the ledger records
// the calls that reached the handler. The report then tells a redelivery
// of one record (Report.Redeliveries: a crash before the commit) from a
// producer's re-send of the same event ID on a new record
// (Report.Resends), which is what dedup removes. lanes' own integration suite and its demo use the same
// kit, on the embedded broker and on real Kafka.
//
// The package imports the lanes consumer and producer, so the consumer's own
// in-package tests cannot import it (an import cycle); external test packages
// can.
package lanestest
