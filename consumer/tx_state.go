package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txn is the transactional mode's state.
type txn struct {
	sess *kgo.GroupTransactSession
	// mu is held shared by a record finishing (its outputs produced, its
	// offset marked done), alone while a transaction ends and the next
	// begins.
	mu sync.RWMutex
	// failed is the first output the broker refused since the
	// transaction began: it cannot commit.
	failed atomic.Pointer[error]
	// held counts the outputs produced into the open transaction: with
	// none, and no offset to commit, it is not ended (an empty end costs
	// franz-go half a second).
	held atomic.Int64
	// refusals are the inputs whose output was refused for ever
	// (tx_refused.go): their next attempt fails for good.
	refusals refusals
	// ending says a transaction is ending: a record finishing meanwhile
	// is kept, in order, for the next one (tx_finish.go). Guarded by
	// keptMu, taken before mu.
	keptMu sync.Mutex
	ending bool
	kept   []keptFinish
	keptN  int64 // records ever kept (tests)
	// moved says a revoke or a lost partition came since the transaction
	// began: franz-go aborts it at its end, which must then come (and
	// rewind) even when it holds nothing.
	moved atomic.Bool
	// stopPoll ends the poll under way: a revoke or a lost partition
	// makes the poll loop end the transaction at once (txTick), before a
	// second rebalance can come: franz-go's session calls lanes' revoke
	// and lost callbacks only for the first of a transaction.
	stopPoll atomic.Pointer[context.CancelFunc]
	due      time.Time // the next end: the poll loop's alone
	// open: an End returned before it ended the transaction (franz-go's
	// Flush or AbortBufferedRecords cut by its context) and the abort
	// that followed did not end it either: it is still open, with outputs
	// of inputs since rewound; the next End must abort it. The poll
	// loop's alone.
	open bool
	// stuckN counts transactions in a row that could not begin (or whose
	// abort failed); fatal, once set, ends Run (stuck). The poll loop's
	// alone (Run reads fatal after the poll loop returned).
	stuckN int
	fatal  error
	// rejoinN counts the member's rejoins since a transaction last
	// committed (tx_rejoin.go's backoff). The poll loop's alone.
	rejoinN     int
	rejoinCount atomic.Int64       // rejoins ever
	cancelCl    context.CancelFunc // ends the context of a client made by a rejoin (tx_rejoin.go); the poll loop's

	committed, aborted, outputs, rewinds atomic.Int64
	endNanos                             atomic.Int64 // time spent ending transactions that committed

	whyMu      sync.Mutex // guards what Health says (tx_observe.go)
	inRow      int        // transactions aborted in a row
	firstAbort time.Time  // the first of them
	lastWhy    string     // why the last aborted
	beginErr   string     // a failed Begin's error, "" once one began
	beginAt    time.Time
	txID       string    // the transactional ID in use
	leftWhy    string    // why the member left to join again, "" while it is in
	leftAt     time.Time // when it left
	nextID     string    // the transactional ID it joins under
	nextAt     time.Time // when it tries next
}

// currentID is the transactional ID in use: the configured one, until a
// fenced member joins again under another (tx_rejoin.go).
func (t *txn) currentID() string {
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	return t.txID
}

// noteFenced keeps, for Health, that the member left its group (t.fatal
// says why) and joins again under id at next.
func (t *txn) noteFenced(id string, next time.Time) {
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	if t.leftWhy == "" {
		t.leftAt = time.Now()
	}
	t.leftWhy, t.nextID, t.nextAt = t.fatal.Error(), id, next
}

// noteRejoined: the member joined again under id.
func (t *txn) noteRejoined(id string) {
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	t.txID, t.leftWhy, t.beginErr, t.inRow = id, "", "", 0
}

// refused is every output's promise: the first error makes the open
// transaction abort.
func (t *txn) refused(r *kgo.Record, err error) {
	if err != nil {
		t.refusals.noteRefused(r, err)
		err = fmt.Errorf("output to %s/%d: %w", r.Topic, r.Partition, err)
		t.failed.CompareAndSwap(nil, &err)
	}
}

// errCommitUnread marks the open transaction's failure as a partition's
// commit that could not be read (unread): not an output's.
var errCommitUnread = errors.New("the group's commit could not be read")

// unread fences parts, whose group commit could not be read at their
// take-up, and fails the open transaction: their records are not handled
// here (their outputs would commit without their offset, which toCommit
// cannot offer while the commit is unread, and the records its metadata
// lists as completed would be handled again), and the abort's rewind
// reads the commits again. While they cannot be read the member aborts
// every CommitInterval, and Health says so after three.
func (t *txn) unread(parts []*partition, err error) {
	for _, p := range parts {
		p.stopStarting()
	}
	err = fmt.Errorf("%w (%d partitions, their records not handled until it is): %w", errCommitUnread, len(parts), err)
	t.failed.CompareAndSwap(nil, &err)
}

// noteEnd keeps what Health says of the transaction that just ended:
// committed, or aborted for why.
func (t *txn) noteEnd(committed bool, why string, now time.Time) {
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	if committed {
		t.inRow, t.lastWhy = 0, ""
		return
	}
	if t.inRow == 0 {
		t.firstAbort = now
	}
	t.inRow++
	t.lastWhy = why
}

// noteBegin keeps a failed Begin's error ("" when it began).
func (t *txn) noteBegin(err error, now time.Time) {
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	switch {
	case err == nil:
		t.beginErr = ""
	case t.beginErr == "":
		t.beginErr, t.beginAt = err.Error(), now
	}
}

// stuck counts a transaction that could not begin, or whose abort did not
// end it (err; nil: it went), and gives up (t.fatal) at a fenced producer
// (another process took the transactional ID) or after txStuckLimit in a
// row: the member then leaves its group, so that its partitions go on
// elsewhere, and joins again with a new producer (tx_rejoin.go). The poll
// loop's alone.
func (t *txn) stuck(err error) {
	if err == nil {
		t.stuckN = 0
		return
	}
	t.stuckN++
	if t.fatal == nil && (t.stuckN >= txStuckLimit || fencedBy(err) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)) {
		t.fatal = fmt.Errorf("%w: %w", ErrFenced, err)
	}
}

// txStuckLimit is how many transactions in a row may fail to begin (or to
// abort) before the member leaves to join again.
const txStuckLimit = 3

// keptFinish is a record that finished while a transaction ended.
type keptFinish struct {
	w    *work
	done bool
}

// rebalanced notes a revoke or a lost partition: the open transaction
// aborts at its end, which the poll loop is woken to make now.
func (t *txn) rebalanced() {
	t.moved.Store(true)
	if stop := t.stopPoll.Load(); stop != nil {
		(*stop)()
	}
}

// fencedBy reports whether err says another producer took the
// transactional ID: fenced (ProducerFenced), or its epoch bumped
// (InvalidProducerEpoch, fatal under KIP-890's transactions; what kfake
// answers a fenced producer's writes).
func fencedBy(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}
