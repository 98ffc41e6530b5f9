// Package parkset is the parked set of one source partition: the sessions
// whose records wait in its park partition, and every rule over them
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#the-parked-set-and-the-lane):
// when a session is parked, which record of it is retried next and when,
// what a failed retry costs, when the session is held or unparked, which
// source records were done before (a session's floor), and the park
// position a commit carries.
//
// It owns the identity rules of the park partition too
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#identity):
// which of its entries are the group's own and in force (written under the
// fence of the partition's current owner), where a rebuild starts reading
// them (Start) and when its owner writes a reset fence
// (Fence.OtherProtocol), as a rebuild replays them
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#rebuild-on-assignment)
// and as the owner picks up an operator's release
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#releasing-a-held-session).
//
// It does no I/O: the consumer writes the park partition's entries,
// reads them back and tells the set what was acknowledged or read (Add,
// Done, Held, Replay). Time is passed in. A Set is not safe for concurrent
// use: the caller's partition lock guards it, so that a record's park copy
// is added and its source record marked done in one step, and a commit
// reads the source watermark and the park position as one snapshot.
package parkset
