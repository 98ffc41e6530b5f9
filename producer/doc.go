// Package producer sends session-keyed messages to Kafka for lanes.
//
// Every message carries its session ID as the record key and in the
// lanes-session-id header, and a stable event ID in lanes-event-id (a new
// UUIDv7, or a deterministic one from WithSequence / WithEventID). The event
// ID is written once, before the first attempt, so franz-go's retries resend
// the very same ID and consumers can deduplicate on it.
//
// Partition choice is Kafka-compatible by default (murmur2 of the session,
// the Java client's default partitioner), so other clients keyed by session
// agree; PartitionJump selects jump consistent hashing instead, which moves
// far fewer sessions when partitions are added.
//
// Order: messages of one session sent in sequence (Send after Send, or
// SendAsync calls from one goroutine) are written in that order. The client
// is idempotent, so retries never reorder or duplicate within a partition;
// if one message of a partition fails for good, the messages buffered
// behind it for that partition fail too, and each callback reports it.
//
// For several producer instances behind a gateway, Router names the
// instance that owns a session.
//
// Logs go to slog.Default() unless Config.Slog names another logger: a
// failed delivery at Warn (rate-limited) and franz-go's warnings, so a
// broker that cannot be dialled is said at once.
//
//	p, err := producer.New(producer.Config{Brokers: brokers, Topic: "chat-messages"})
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	if err := p.Ping(ctx); err != nil { // a broker answers, the topic exists
//		return err
//	}
//	res, err := p.Send(ctx, "chat-42", []byte("book a flight to London"))
//
// [The producer guide] in the repository goes further; the module does
// not carry it.
//
// [The producer guide]: https://github.com/lanesdev/lanes/blob/main/docs/producer.md
package producer
