// Package pgdedup keeps dedup claims in PostgreSQL, and runs handlers that
// write to PostgreSQL exactly once per event ID.
//
// [Store] is a dedup.Store: a table keyed by (group_id, event_id) whose
// rows are claims (a token and an expiry) or done marks (kept for
// DoneTTL). Claims are one INSERT … ON CONFLICT DO UPDATE that takes an
// absent or expired row, so concurrent claims on one event serialise on
// its row and at most one wins. Used through dedup.Middleware, it gives the
// dedup package's guarantee: effects at least once per event ID, repeated
// only when a handler applied its effect and did not get to mark it done.
//
// [Store.TxHandler] closes that window for effects in the same database:
// it begins a transaction, marks the event done in it (the INSERT waits
// for any other transaction marking the same event, and finds it done if
// that one committed), runs the handler's own SQL in the same transaction
// and commits both together. The effect and the mark commit or roll back
// as one, so the handler's writes are applied exactly once per event ID:
// never twice (a redelivery finds the mark and skips), and never lost (a
// failure or a panic rolls both back and the consumer retries; lanes never
// drops a record). Effects outside the transaction (an HTTP call, a Kafka send)
// keep the at-least-once guarantee. Do not use the middleware and a
// TxHandler for the same group: the transaction ignores claims.
// [TxConfig] takes the same Key and NoEventID as dedup.Config: by default a
// message without an event ID is refused (dedup.ErrNoEventID, permanent:
// dead-lettered), never keyed by its reusable offset.
//
// Create the table once with [Store.CreateTable] (or your migrations: see
// its SQL), and delete expired rows now and then with [Store.Purge].
package pgdedup
