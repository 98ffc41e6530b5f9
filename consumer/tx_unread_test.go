package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTransactionsUnreadCommit: a transaction aborts (an output refused)
// and its rewind cannot read the group's commits (lanes' reads refused;
// franz-go's own, which name the member, pass). The partition's records
// are not handled until a read succeeds: its outputs would commit without
// its offset, which is not committed while the commit is unread. Before
// the fix the member handled offsets 5 to 9 and committed their outputs,
// never their offsets, and a member started later handled them again:
// their outputs were read twice at read_committed.
func TestTransactionsUnreadCommit(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	const group = "g-tx-unread"
	values := func(from, to int) []string { return seqValues(from, to, "a") }
	h := echoOutput
	cfg := e.config(group, "tx-in")
	cfg.CommitTimeout = 500 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produceValues("tx-in", values(0, 5)...) // offsets 0 to 4
	waitFor(t, "offsets 0 to 4 committed", func() bool { return committedSum(e, group) == 5 }, nil)

	unreadable, refused := e.refuseCommitReads()
	var armed atomic.Bool // the member's next write to tx-out is refused: its transaction aborts
	armed.Store(true)
	e.answerProduce("tx-out", func([]byte) int16 {
		if armed.CompareAndSwap(true, false) {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
	e.produceValues("tx-in", values(5, 10)...) // offsets 5 to 9
	// With the fix the member aborts again for the unread commit; without
	// it, offset 9's output commits (its offset cannot: it is unread).
	nineOut := func() bool { return readOutputs(t, e, "tx-out", true).bySeq["a"][9] > 0 }
	waitFor(t, "an abort for the unread commit, or offset 9's output committed", func() bool {
		st := c.Stats().Transactions
		return st.Rewinds > 0 && refused.Load() > 0 && st.Aborted >= 2 || nineOut()
	}, func() string { return fmt.Sprintf("%+v, %d reads refused", c.Stats().Transactions, refused.Load()) })
	if nineOut() {
		t.Fatal("offset 9's output is committed while the group's commit, unread, could not commit offset 9")
	}
	unreadable.Store(false) // lanes' next rewind reads the commits
	waitFor(t, "every input committed", func() bool { return committedSum(e, group) == 10 }, func() string {
		return fmt.Sprintf("%+v", c.Stats().Transactions)
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	c2, err := New(cfg, h) // a restart reads the group's commit: nothing to do again
	if err != nil {
		t.Fatal(err)
	}
	stop2 := start(t, c2)
	waitFor(t, "the restarted member's partition", func() bool { return len(c2.Stats().Partitions) == 1 }, nil)
	if err := stop2(); err != nil {
		t.Errorf("Run: %v", err)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), []string{"a"}, 10, 1, nil)
}

// TestPollCutAfterRebalance: a revoke's rebalanced that ran between two
// polls (it found the spent cancel of the last one) still cuts the next
// poll short, so the transaction ends before a second revoke can go
// unseen. Before the fix the next poll ran until the transaction was due.
func TestPollCutAfterRebalance(t *testing.T) {
	c := &Consumer{tx: &txn{due: time.Now().Add(time.Hour)}}
	pctx, cancel := c.pollCtx(context.Background())
	cancel() // the last poll ended
	if pctx.Err() == nil {
		t.Fatal("a poll's context outlived its cancel")
	}
	c.tx.rebalanced() // a revoke between polls: the cancel it finds is spent
	pctx, cancel = c.pollCtx(context.Background())
	defer cancel()
	if pctx.Err() == nil {
		t.Fatal("the poll after a rebalance since the transaction began is not cut short: it runs until the transaction is due")
	}
	c.tx.moved.Store(false) // the transaction ended (txEnd)
	if pctx, cancel := c.pollCtx(context.Background()); pctx.Err() != nil {
		cancel()
		t.Fatal("a poll after the transaction ended is cut short")
	} else {
		cancel()
	}
}
