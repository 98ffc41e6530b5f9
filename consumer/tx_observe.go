package consumer

import (
	"fmt"
	"time"
)

// What the transactional mode shows an operator: its Health reasons and
// its metrics (https://github.com/lanesdev/lanes/blob/main/docs/exactly-once.md#watching-it).

// txAbortsReason is how many transactions in a row must abort before
// Health says so: one abort is a rebalance's ordinary cost.
const txAbortsReason = 3

// txReasons are the transactional mode's Health reasons: transactions
// that keep aborting (nothing this member handles commits), and a
// transaction that cannot begin, and a member that left its group to join
// again (tx_rejoin.go). Each clears when its cause ends: a transaction
// commits, one begins, the member joined again.
func (c *Consumer) txReasons(now time.Time) []string {
	t := c.tx
	if t == nil {
		return nil
	}
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	var out []string
	if t.leftWhy != "" {
		out = append(out, fmt.Sprintf("transactions: the member left its group at %s (%v ago): %s; "+
			"it joins again as a new member with transactional ID %q (next try at %s), and owns nothing meanwhile; "+
			"if another process uses the same transactional ID, give each its own (TransactionPolicy.ID)",
			t.leftAt.UTC().Format(time.RFC3339), now.Sub(t.leftAt).Round(time.Second), t.leftWhy,
			t.nextID, t.nextAt.UTC().Format(time.RFC3339)))
		return out
	}
	if t.beginErr != "" {
		out = append(out, fmt.Sprintf("transactions: cannot begin one since %s (%v), transactional ID %q: %s; "+
			"nothing this member handles commits; after %d failures in a row it leaves its group and joins again",
			t.beginAt.UTC().Format(time.RFC3339), now.Sub(t.beginAt).Round(time.Second), t.txID, t.beginErr, txStuckLimit))
	}
	if t.inRow >= txAbortsReason {
		out = append(out, fmt.Sprintf("transactions: the last %d aborted, since %s (%v); the last because %s: "+
			"what this member handles is handled again and nothing commits; see the log's 'transaction aborted' lines",
			t.inRow, t.firstAbort.UTC().Format(time.RFC3339), now.Sub(t.firstAbort).Round(time.Second), t.lastWhy))
	}
	return out
}
