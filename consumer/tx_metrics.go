package consumer

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

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
