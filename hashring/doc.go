// Package hashring is the one hash lanes uses for session IDs, and the three
// ways lanes turns a key into a placement.
//
// [Sum64] hashes a session ID (xxhash64 of its UTF-8 bytes). Every lanes
// component that places a session by hash uses it, so producers and
// consumers agree. The placements:
//
//   - [Jump] maps a hash onto a fixed number of buckets with Lamping and
//     Veach's jump consistent hash: the consumer's shards, and the producer's
//     optional consistent partitioner. Growing from n to n+1 buckets moves
//     about 1/(n+1) of the keys, all of them into the new bucket.
//   - [Ring] places keys on named members (producer instances, workers) that
//     come and go. It is a consistent-hash ring of virtual nodes with a
//     direct-indexed lookup table, so lookups cost tens of nanoseconds and
//     allocate nothing; adding or removing a member moves only the keys that
//     belong to it. An optional bounded-load mode caps every member at
//     (1+ε)·mean load.
//   - [KafkaPartition] picks the partition Apache Kafka's Java client picks for
//     a key (murmur2, via franz-go), so lanes agrees with other Kafka clients.
//
// Never choose consumer shards with [KafkaPartition]: all sessions of one
// partition share the same murmur2 residue, so reusing that hash would put
// them on one or a few shards. lanes uses Jump(Sum64(session), W) instead.
//
// [The hashring guide] in the repository goes further; the module does
// not carry it.
//
// [The hashring guide]: https://github.com/lanesdev/lanes/blob/main/docs/hashring.md
package hashring
