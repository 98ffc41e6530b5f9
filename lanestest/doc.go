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
// # Sessions that span topics
//
// The ledger knows a message by its session and seq, and Send derives the
// event ID from those two alone, not from the topic. A conversation sent to
// two topics under one session ID (Send with producer.WithTopic) is one
// session to the ledger: number its messages in one sequence across the
// topics and never give two topics the same seq, which would be one event
// ID twice (the ledger counts the second as a re-send, and a dedup
// middleware skips it).
//
// The report then checks what lanes promises for such a session, no more:
// order within each topic (a message waits for the session's previous seq
// on its own topic; lanes does not order one session's records across
// topics), and no overlapping calls on any topic. The latter holds for one
// consumer reading both topics (consumer.TopicHandlers, or both in
// Config.Topics): a session's records share one lane and are handled one
// at a time, in the order they arrive. With one consumer per topic, the
// two streams of a session run side by side, so give each consumer its own
// Ledger (and Run), each with its topic's sends: seqs one ledger never saw
// are no gap to it.
//
// The package imports the lanes consumer and producer, so the consumer's own
// in-package tests cannot import it (an import cycle); external test packages
// can.
package lanestest
