// Package consumer runs the lanes pipeline over a Kafka consumer group:
// messages of one session are handled strictly in order, one at a time,
// while different sessions run in parallel, far beyond the parallelism that
// partitions alone give.
//
// # Guarantees
//
//   - Session order. The handler sees the messages of a session in
//     partition-offset order and never starts message n+1 before message n
//     succeeded or was dead-lettered.
//   - At-least-once, no loss. An offset is committed only when it and every
//     lower offset of its partition are done (handled, or acknowledged by the
//     dead-letter topic). A crash or shutdown may redeliver, never lose.
//   - Isolation. A failing or slow session holds only its own lane; other
//     sessions, on the same partition too, keep flowing.
//   - Bounded memory. A session's lane, and the worker goroutine draining
//     it, exist only while the session has work; records held per partition
//     are bounded by MaxBufferedRecords, beyond which fetching pauses.
//
// # Pipeline
//
// Run polls records with franz-go and routes each, in partition order, to
// one of Shards lock stripes by Sum64(session) scaled onto Shards; a
// stripe keeps one lane per active session. A lane calls the Handler with a
// per-attempt timeout, retries failures with exponential backoff and jitter
// while later messages of that session wait, and sends permanent failures
// (Permanent(err), Undecodable(err), or a spent retry budget) to
// DeadLetterTopic with lanes-dlq-* headers. A per-partition offset tracker
// turns finished offsets into a contiguous watermark, committed every
// CommitInterval, on revoke and on shutdown.
//
// # Parking
//
// With Config.Park (off by default), a session whose record keeps failing
// moves, with its later records, to a park topic, in order, so its
// partition keeps flowing for every other session; it is retried from
// there in its own lane and unparked once its parked records are done
// (see [the parking guide]). A handler parks a record at once with
// Park(err).
//
// # Logs
//
// lanes logs to slog.Default() unless Config.Slog names another logger:
// a line per assignment and revoke, at the shutdown's start and end, and
// for what needs an operator (a broker unreachable, a topic missing, a
// dead-lettered record, a spent retry budget, a recovered panic, a slow
// handler, a stall, what makes the consumer not ready), with franz-go's
// warnings and errors; never one per message.
// slog.New(slog.DiscardHandler) logs nothing.
//
// # Example
//
//	c, err := consumer.New(consumer.Config{
//		Brokers:         []string{"127.0.0.1:9092"},
//		Group:           "chat-service",
//		Topics:          []string{"chat-messages"},
//		DeadLetterTopic: "chat-messages-dlq",
//	}, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
//		return bookings.Apply(ctx, m.SessionID, m.EventID, m.Record.Value)
//	}))
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx is cancelled; then drains and commits
//
// # Guides
//
// The repository's guides go further; the module does not carry them:
// [the consumer guide] (configuration, the decisions behind it, batches,
// group protocols, the circuit breaker), [the guarantees] and the tests
// that prove them, [the parking guide], [observability] (spans, metrics,
// health, log lines) and [operations] (sizing and scaling out).
//
// [the consumer guide]: https://github.com/lanesdev/lanes/blob/main/docs/consumer.md
// [the guarantees]: https://github.com/lanesdev/lanes/blob/main/docs/guarantees.md
// [the parking guide]: https://github.com/lanesdev/lanes/blob/main/docs/parking.md
// [observability]: https://github.com/lanesdev/lanes/blob/main/docs/observability.md
// [operations]: https://github.com/lanesdev/lanes/blob/main/docs/operations.md
package consumer
