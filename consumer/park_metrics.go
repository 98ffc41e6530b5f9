package consumer

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerParkMetrics adds the parking gauges
// (https://github.com/lanesdev/lanes/blob/main/docs/observability.md#metrics),
// observed from Stats like the others; partitions without parking report
// nothing.
func registerParkMetrics(m metric.Meter, stats func() Stats, group string) (metric.Registration, error) {
	var err error
	g := func(name, unit, desc string) metric.Int64ObservableGauge {
		i, e := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	sessions := g("lanes.consumer.park.sessions", "{session}", "Parked sessions, per partition (Config.Park).")
	held := g("lanes.consumer.park.held", "{session}", "Parked sessions held after their retry budget was spent, per partition.")
	records := g("lanes.consumer.park.records", "{record}", "Parked records not yet done, per partition.")
	oldest, e := m.Float64ObservableGauge("lanes.consumer.park.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest parked record, per partition."))
	if err = errors.Join(err, e); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range stats().Partitions {
			if p.Park == (ParkStats{}) {
				continue
			}
			at := metric.WithAttributes(attribute.String("messaging.destination.name", p.Topic),
				attribute.Int("messaging.destination.partition.id", int(p.Partition)),
				attribute.String("messaging.consumer.group.name", group))
			o.ObserveInt64(sessions, int64(p.Park.Sessions), at)
			o.ObserveInt64(held, int64(p.Park.Held), at)
			o.ObserveInt64(records, int64(p.Park.Records), at)
			o.ObserveFloat64(oldest, p.Park.Oldest.Seconds(), at)
		}
		return nil
	}, sessions, held, records, oldest)
}
