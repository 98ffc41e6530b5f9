// Package regrow holds the rules by which lanes keeps a session's order
// when a consumed topic's partition count grows
// (https://github.com/lanesdev/lanes/blob/main/docs/operations.md#adding-partitions-to-a-live-topic).
//
// lanes' producer stamps each record with its placement: the scheme and
// the partition count it hashed the key over (hashring.HeaderPlacement).
// After a topic grows from c to n partitions, a session whose key the new
// count places elsewhere has its older records on its old partition and
// its newer ones on the new. The rules here say which records wait and
// until when:
//
//   - A [History] is what a member knows of a topic's partition counts: the
//     counts whose records may still be unhandled, learnt from the topic's
//     metadata, from the group's commits (their metadata carries the
//     committer's history, [History.Segment]) and from the stamps of the
//     records it reads.
//   - A record stamped with count n on partition p is moved when an older
//     count of the history places its key on another partition q
//     ([OldHomes]). Its session waits on p until the group's committed
//     offset on every such q has reached the end offset q had when the wait
//     began: every record of the session produced before this one on q is
//     then handled. A session released on p stays released while the
//     member owns p ([Holds]).
//   - A parked record is out of its partition's way, so its owner's
//     commits also name the sessions parked there with records of an older
//     count ([SessionHash]). A moved session so named on an old partition
//     is not released: the consumer parks it on its new partition behind
//     them, and its retry there waits while any old partition names it
//     ([ParkedAway]).
//   - A topic's change is over once producers have had time to learn the
//     new count (a grace period) and the group's committed offsets on the
//     old partitions have passed their ends measured after it, with none of
//     them naming a parked session: the history
//     then keeps the newest count only.
//
// The package does no I/O: the consumer lists offsets, reads commits and
// wakes the lanes.
package regrow
