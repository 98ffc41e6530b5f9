// Package groupwire reads the group coordinator's answers on the wire.
//
// franz-go's hooks tell that a request was answered (HookBrokerE2E), not
// how: a coordinator that is moving, loading the group, or stalled on its
// log answers heartbeats with NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE without taking them, and franz-go retries
// them in place, so that to the hooks the member looks heard while its
// session runs out. Watch wraps the client's dial function: each
// connection notes when a request of the keys watched was written and,
// when its answer is read, reports the answer's error code. Nothing else
// is parsed: a frame's length and correlation ID are read to find the
// watched answers, and only those (a few hundred bytes) are kept and
// decoded with kmsg.
//
// A connection is written by one goroutine and read by another
// (franz-go's); the requests pending an answer are guarded by a mutex.
package groupwire
