// Package eventid gives every lanes message a stable event ID and reads and
// writes the lanes headers on Kafka records.
//
// An event ID is a UUID in its canonical 36-character form, carried in the
// lanes-event-id header. [New] returns a time-ordered UUIDv7; [ForSequence]
// returns a deterministic UUIDv5 of a session and a sequence number, so a
// client that resends message #7 of a session produces the same ID again and
// downstream services can deduplicate on it. The producer stamps the ID once
// per message, so it never changes across retries of the produce.
//
// The session ID travels in the lanes-session-id header (and as the record
// key). [Parse] validates an ID read from the wire.
package eventid
