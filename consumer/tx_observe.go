package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// What the transactional mode shows an operator: its Health reasons and
// its metrics (https://github.com/lanesdev/lanes/blob/main/docs/exactly-once.md#watching-it).

// txAbortsReason is how many transactions in a row must abort before
// Health says so: one abort is a rebalance's ordinary cost.
const txAbortsReason = 3

// txReasons are the transactional mode's Health reasons: transactions
// that keep aborting (nothing this member handles commits), and a
// transaction that cannot begin. Each clears when a transaction commits.
func (c *Consumer) txReasons(now time.Time) []string {
	t := c.tx
	if t == nil {
		return nil
	}
	t.whyMu.Lock()
	defer t.whyMu.Unlock()
	var out []string
	if t.beginErr != "" {
		out = append(out, fmt.Sprintf("transactions: cannot begin one since %s (%v), transactional ID %q: %s; "+
			"nothing this member handles commits: if another process uses the same ID, give each its own (TransactionPolicy.ID), then restart this one",
			t.beginAt.UTC().Format(time.RFC3339), now.Sub(t.beginAt).Round(time.Second), c.cfg.Transactions.ID, t.beginErr))
	}
	if t.inRow >= txAbortsReason {
		out = append(out, fmt.Sprintf("transactions: the last %d aborted, since %s (%v); the last because %s: "+
			"what this member handles is handled again and nothing commits; see the log's 'transaction aborted' lines",
			t.inRow, t.firstAbort.UTC().Format(time.RFC3339), now.Sub(t.firstAbort).Round(time.Second), t.lastWhy))
	}
	return out
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

// registerTxMetrics adds the transactional mode's counters, observed
// from Stats like the others; the time to end a committed transaction is
// lanes.consumer.commit.duration's.
func registerTxMetrics(m metric.Meter, stats func() Stats, group string) (metric.Registration, error) {
	var err error
	ctr := func(name, desc string) metric.Int64ObservableCounter {
		i, e := m.Int64ObservableCounter(name, metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	ended := ctr("lanes.consumer.transactions", "Transactions ended, by lanes.transaction.outcome (committed, aborted) (Config.Transactions).")
	outputs := ctr("lanes.consumer.transaction.outputs", "Output records produced into transactions, those of aborted ones too.")
	rewinds := ctr("lanes.consumer.transaction.rewinds", "Restarts of the member's partitions from the group's commit after an aborted transaction.")
	if err != nil {
		return nil, err
	}
	grp := attribute.String("messaging.consumer.group.name", group)
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats().Transactions
		if st == (TxStats{}) {
			return nil
		}
		o.ObserveInt64(ended, st.Committed, metric.WithAttributes(grp, attribute.String("lanes.transaction.outcome", "committed")))
		o.ObserveInt64(ended, st.Aborted, metric.WithAttributes(grp, attribute.String("lanes.transaction.outcome", "aborted")))
		o.ObserveInt64(outputs, st.Outputs, metric.WithAttributes(grp))
		o.ObserveInt64(rewinds, st.Rewinds, metric.WithAttributes(grp))
		return nil
	}, ended, outputs, rewinds)
}
