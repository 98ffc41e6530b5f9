package consumer

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The state of one partition for one assignment: its fields, its making
// and its lock's release. Its rules are partition.go's (admit, start,
// finish, commit points, stats), backpressure.go's, stall_clock.go's,
// park_partition.go's and park_release.go's (release markers), and
// oplog.go reads it for its lines.

// parkHeldLocked reports whether p's parked set is unavailable: nothing of
// p reaches a lane. p.mu held.
func (p *partition) parkHeldLocked() bool { return p.pk != nil && p.pk.unavailable != nil }

// stallClock is a partition's stall sample, taken by the watchdog's stall
// check (under partition.mu).
type stallClock struct {
	lastWM   int64         // the watermark at the last check
	movedAt  time.Time     // when a check last saw it move
	countAt  time.Time     // when the stall clock last started: movedAt, or later while its holder slept (control.go)
	heldBase time.Duration // the hold clock's total at countAt
	counted  time.Duration // the stall clock at the last check: time since countAt, less the time held
	sampled  time.Time     // when the last check ran
	held     bool          // a hold was in force at the last check
	stalled  bool          // counted reached StallTimeout (kept through a hold)
}

// stallSample is what one stall check saw of a partition.
type stallSample struct {
	offset  int64         // the record holding the watermark
	seq     uint64        // its sequence number
	counted time.Duration // the stall clock
	since   time.Time     // when the watermark last moved
	// stalled: counted reached StallTimeout and no hold is in force;
	// fresh: this check is the first to see it.
	stalled, fresh bool
}

type partKey struct {
	topic     string
	partition int32
}

// partition is the state of one partition for one assignment of it, and
// the rules over that state. Every field below mu is written only by the
// partition's methods (partition.go, backpressure.go, stall_clock.go,
// park_partition.go, park_release.go), under mu; each method that changes what the
// partition holds ends in settle, which decides pause and resume from the
// state itself, so no path can leave a partition paused with little held or
// running unbounded with much held.
//
// Its life (the table is in
// https://github.com/lanesdev/lanes/blob/main/docs/design.md#the-partition-consumerpartitiongo):
//
//	active ──fence──► fenced ──(running == 0)──► drained
//	   │                 │
//	   └──────release────┴──► released: owned no more; nothing is committed
//
// A new assignment gets a new partition value (a new epoch), so work that
// finishes after its partition was revoked only ever touches the old value:
// the fence by assignment.
type partition struct {
	// admitMu serialises handing records to lanes (admission and the
	// shard enqueues after it), from a fetch or from the stash, so they
	// reach their lanes in offset order. Taken before mu.
	admitMu sync.Mutex

	key     partKey
	keyless string // the lane of its records with no session (nilLane)
	epoch   uint64
	max     int              // MaxBufferedRecords: pause at max held, resume at max/2
	notify  func(*partition) // told, outside mu, when the wanted fetch state flips
	// rewound marks a partition fenced by an aborted transaction (tx.go):
	// its records finishing after drop their outputs and stay undone.
	// Set under the transaction's lock, read under it shared.
	rewound bool

	// attempts is the parent of every handler attempt and dead-letter
	// write of this assignment (a child of the consumer's work context);
	// cancelAttempts ends them when a revoke's drain runs out of time or
	// the partition is released. Set once at creation.
	attempts       context.Context
	cancelAttempts context.CancelFunc

	mu       sync.Mutex
	tr       offsets.Tracker
	queued   int           // records handed to lanes, not started
	running  int           // records whose handler (or DLQ write) is under way
	full     bool          // backpressure: hand no record to lanes (backpressure.go)
	paused   bool          // wanted fetch state; the flow controller applies it
	stash    []*kgo.Record // fetched while full, not yet handed to lanes
	fenced   bool          // revoked, lost or shutting down: start nothing more
	released bool          // no longer owned: never commit
	fence    chan struct{}
	drained  chan struct{} // closed once fenced and running == 0
	marked   chan struct{} // closed and replaced by markDone
	hwm      int64         // end offset from the latest fetch or listing; -1 unknown
	lso      atomic.Int64  // last stable offset from the latest fetch (Stats); 0 before one

	committed        int64           // last offset committed by this assignment; -1 none
	committedMeta    string          // metadata of the last commit
	committedVersion uint64          // tracker version the last commit (or check) covered
	prior            offsets.Skipper // offsets completed before this assignment

	stall stallClock // the stall watch's sample (stall_clock.go)
	// asleep are the records at the head of a sleeping lane (paused or
	// rate-held: control.go), which the stall clock does not count. Under
	// asleepMu alone (taken under a shard's lock, and under p.mu).
	asleepMu sync.Mutex
	asleep   map[uint64]struct{}
	// stallAgain asks the next stall check to start the stall clock
	// again: a lane holding a record of p woke after a long sleep.
	stallAgain atomic.Bool

	dlqFails map[uint64]dlqFail // failing dead-letter writes by sequence number, of records not done

	parkWrites parkWriteFails // its park writes failing now, with Config.Park (park_fails.go)

	commitErr  error     // the error of the last commit of this partition; nil after a success
	commitFrom time.Time // when its commits started failing

	grow partGrow // its part in a growth of its topic (growth_partition.go)

	pk *partPark // parking (park_state.go, its rules park_partition.go); nil when off
	// parkKept is the park section of the group's commit found with
	// parking off: kept in every commit, so that turning parking on again
	// finds what was parked (park_partition.go).
	parkKept string
	// parkOffUnread: parking is off and the group's commits could not be
	// read at assignment, so whether they hold a park section to keep is
	// unknown: nothing is committed until the commit loop reads it.
	parkOffUnread bool
}

// newPartition makes the state of one assignment; its attempts run under a
// child of work.
func newPartition(workCtx context.Context, k partKey, epoch uint64, max int, notify func(*partition)) *partition {
	attempts, cancel := context.WithCancel(workCtx)
	return &partition{
		key: k, keyless: nilLane(k), epoch: epoch, max: max, notify: notify, tr: offsets.NewTracker(),
		attempts: attempts, cancelAttempts: cancel,
		fence: make(chan struct{}), drained: make(chan struct{}), marked: make(chan struct{}),
		committed: -1, hwm: -1, stall: stallClock{lastWM: -1, movedAt: time.Now(), countAt: time.Now()},
	}
}

// nilLane is the lane of a partition's records with no session: one lane
// per partition, so they keep their partition's order.
func nilLane(k partKey) string {
	return keylessMark + k.topic + "/" + strconv.FormatInt(int64(k.partition), 10)
}

// unlock releases p.mu and tells the flow controller when flipped.
func (p *partition) unlock(flipped bool) {
	p.mu.Unlock()
	if flipped && p.notify != nil {
		p.notify(p)
	}
}

// dlqFail is a record whose dead-letter copy could not be written.
type dlqFail struct {
	offset int64
	err    string    // the last write's error
	at     time.Time // when its first write failed
	// cut: the write did not fail, the shutdown (or a revoke) ended it
	// before the broker answered; not reported as failing, only named by
	// the shutdown as unfinished. A write that fails after it clears it.
	cut bool
	// blocked: a write failed with an error that is not retriable, counted
	// once in Stats.DeadLetterBlocked (dlqBlocked).
	blocked bool
}

// keylessMark begins the name of a keyless lane (nilLane): a NUL, which
// keeps it apart from every session key a producer would send.
const keylessMark = "\x00"
