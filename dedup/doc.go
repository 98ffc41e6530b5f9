// Package dedup runs a lanes handler at most once per event ID, as far as a
// store of claims can make it: the handler's effects are applied once per
// event even though Kafka delivers at least once (a crash before the offset
// commit, a rebalance, a producer retry or a replay delivers an event again).
//
// Put a [Dedup]'s Middleware first in consumer.Config.Middleware (or after
// middleware that must see every delivery, such as metrics):
//
//	d, _ := dedup.New(dedup.Config{Store: store}) // marks kept under the consumer group
//	c, _ := consumer.New(consumer.Config{..., Group: "payments",
//		Middleware: []consumer.Middleware{d.Middleware}}, handler)
//
// # The protocol
//
// Every attempt claims its key, (group, event ID), in the [Store] before the
// handler runs:
//
//   - not known, or a claim that expired: claimed; the handler runs. On
//     success the event is marked done; on an error (retried or permanent)
//     or a panic the claim is released, so the next attempt, or a replay
//     from the dead-letter topic, runs it again at once. A panic goes on to
//     the consumer with its own value, which counts it and retries.
//   - done: the handler is skipped, the attempt succeeds and is counted in
//     [Stats].Skipped.
//   - claimed by another attempt that has not expired (a member that
//     crashed mid-handler, or one still running during a rebalance): the
//     attempt waits, checking every WaitInterval, until the event is done
//     (skipped) or the claim expires (claimed; the handler runs), or the
//     attempt's context ends (an error wrapping [ErrBusy]: retried).
//   - the store fails: the attempt fails with an error wrapping [ErrStore],
//     the handler does not run, and the consumer retries it with backoff:
//     an event is never skipped because the store was down.
//
// # The guarantee
//
// With the claim and the handler's effect in different systems (the
// in-memory, Redis and PostgreSQL stores used through Middleware), effects
// are applied at least once per event ID, and more than once only when a
// handler applied its effect and then did not mark it done: its process
// died between the effect and the mark, the store failed at the mark, or
// the handler ran past ClaimTTL while another member claimed the event.
// Without dedup any redelivery repeats the effect; with it only this
// window does. Keep ClaimTTL above the consumer's HandlerTimeout.
//
// When the effect and the mark commit together, effects are applied exactly
// once per event ID (at most once, and at least once since lanes never
// drops a record): module github.com/lanesdev/lanes/dedup/pgdedup runs a
// handler's own SQL and the mark in one PostgreSQL transaction.
//
// An event is remembered as done for the store's retention (its TTL); a
// redelivery after that runs again.
//
// # Messages without an event ID
//
// The key is Config.Key's, by default [EventKey]: the lanes-event-id header
// lanes' producer stamps on every record. A message without one (Config.Key
// returned "") is never keyed by its offset alone: Kafka reuses offsets (a
// topic deleted and created again, a truncated log), and an old record's
// done mark would skip a new one. Config.NoEventID decides instead
// ([NoEventIDPolicy]): by default [RefuseNoEventID] fails the attempt with
// consumer.Permanent wrapping [ErrNoEventID], naming the record and what to
// do, so it goes to the dead-letter topic and the handler does not run;
// [RunWithoutDedup] runs it with no claim (at least once); [KeyByPosition]
// keys it by [PositionKey], the record's position, leader epoch, producer,
// timestamp and a digest of its contents, so that a redelivery of the same
// record is skipped and a different record at a reused offset runs. Each
// is counted in [Stats].
//
// # Stores
//
// [NewMemory] keeps claims in this process, bounded and with a TTL: for
// tests and for a single instance whose dedup need not survive a restart.
// Redis (SET NX with an expiry) is in module
// github.com/lanesdev/lanes/dedup/redisdedup, PostgreSQL in
// github.com/lanesdev/lanes/dedup/pgdedup, so that a consumer pulls in a
// Redis or PostgreSQL client only by choice. Package storetest is the
// test suite every store passes.
//
// [The dedup guide] in the repository goes further; the module does
// not carry it.
//
// [The dedup guide]: https://github.com/lanesdev/lanes/blob/main/docs/dedup.md
package dedup
