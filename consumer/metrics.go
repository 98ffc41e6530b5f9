package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/lanesdev/lanes/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics exports the consumer's numbers through the OpenTelemetry metric
// API. Gauges and counters are observed from Stats() at collection time, so
// Stats and the metrics are one source; only the two latency histograms are
// recorded as events happen. See
// https://github.com/lanesdev/lanes/blob/main/docs/observability.md#metrics
// for the list.
type metrics struct {
	handlerDur metric.Float64Histogram
	commitDur  metric.Float64Histogram
	group      metric.MeasurementOption
	record     []metric.RecordOption // {group}, prebuilt: a variadic literal would allocate per call
	reg        metric.Registration
	parkReg    metric.Registration // park_metrics.go
	txReg      metric.Registration // tx_observe.go
}

func newMetrics(stats func() Stats, group string, mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(tracing.ScopeName)
	out := &metrics{group: metric.WithAttributeSet(attribute.NewSet(attribute.String("messaging.consumer.group.name", group)))}
	out.record = []metric.RecordOption{out.group}
	var err error
	if out.handlerDur, err = m.Float64Histogram("lanes.consumer.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one handler attempt.")); err != nil {
		return nil, err
	}
	if out.commitDur, err = m.Float64Histogram("lanes.consumer.commit.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one offset commit request.")); err != nil {
		return nil, err
	}
	g := func(name, unit, desc string) metric.Int64ObservableGauge {
		i, e := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	ctr := func(name, desc string) metric.Int64ObservableCounter {
		i, e := m.Int64ObservableCounter(name, metric.WithDescription(desc))
		err = errors.Join(err, e)
		return i
	}
	lag := g("lanes.consumer.lag", "{record}", "High watermark minus the committed-to-be watermark, per partition; current while paused.")
	committed := g("lanes.consumer.committed_offset", "{offset}", "Last offset committed, per partition.")
	buffered := g("lanes.consumer.buffered", "{record}", "Records queued in lanes, not started, per partition.")
	inflight := g("lanes.consumer.in_flight", "{record}", "Records whose handler is running, per partition.")
	paused := g("lanes.consumer.paused", "", "1 while backpressure holds the partition: it holds MaxBufferedRecords, or its fetch is paused.")
	stalled := g("lanes.consumer.stalled", "", "1 while the partition is stalled (StallTimeout).")
	blocked := g("lanes.consumer.dead_letter.blocked", "", "1 while the partition is held by a record whose dead-letter copy cannot be written (not retriable).")
	sessions := g("lanes.consumer.sessions.active", "{session}", "Sessions with work (lanes: records queued or running).")
	heldAt := g("lanes.consumer.watermark.held_offset", "{offset}", "Offset of the record holding the partition's watermark (absent when nothing is pending); its session is in Stats and debug/lanes.")
	wmAge, e := m.Float64ObservableGauge("lanes.consumer.watermark.age", metric.WithUnit("s"),
		metric.WithDescription("Time since the partition's watermark last moved while records are pending."))
	err = errors.Join(err, e)
	busy, e := m.Float64ObservableGauge("lanes.consumer.busy", metric.WithUnit("{attempt}"),
		metric.WithDescription("Handler attempts running at once, averaged over about 10 s: the autoscaling signal (with lanes.consumer.watermark.age)."))
	err = errors.Join(err, e)
	busyRatio, e := m.Float64ObservableGauge("lanes.consumer.busy.ratio", metric.WithUnit("1"),
		metric.WithDescription("lanes.consumer.busy divided by MaxConcurrency (only with MaxConcurrency set)."))
	err = errors.Join(err, e)
	processed := ctr("lanes.consumer.processed", "Records handled successfully.")
	retries := ctr("lanes.consumer.retries", "Handler attempts that failed and were retried.")
	dlq := ctr("lanes.consumer.dead_letters", "Records written to the dead-letter topic, by lanes.dlq.reason.")
	dlqFail := ctr("lanes.consumer.dead_letter.failures", "Failed dead-letter writes (each retried).")
	stalls := ctr("lanes.consumer.stalls", "Partitions reported stalled.")
	rebalances := ctr("lanes.consumer.rebalances", "Partition assignments received.")
	overruns := ctr("lanes.consumer.revoke.overruns", "Partitions a revoke gave up while a handler that ignored its cancelled context still ran.")
	holds := ctr("lanes.consumer.silence.holds", "Times the member held its work because its group coordinator took no heartbeat (none answered, or each refused) for four fifths of the session timeout.")
	commitFail := ctr("lanes.consumer.commit.failures", "Failed commit requests.")
	panics := ctr("lanes.consumer.handler.panics", "Handler panics recovered.")
	truncations := ctr("lanes.consumer.truncations", "Fetches that found their partition's log truncated (offsets reused).")
	brkOpen := g("lanes.consumer.breaker.open", "", "1 while the circuit breaker is open: fetching paused, lanes holding their records.")
	brkOpens := ctr("lanes.consumer.breaker.opens", "Times the circuit breaker opened.")
	brkExcused := ctr("lanes.consumer.breaker.excused", "Failed attempts not counted against their record's retry budget because the breaker was open.")
	brkHung := ctr("lanes.consumer.breaker.hung_probes", "Probes given up as hung (running past HandlerTimeout plus its grace): counted as failed, the next probe runs on another lane.")
	if err != nil {
		return nil, err
	}
	out.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats()
		for _, p := range st.Partitions {
			at := metric.WithAttributes(attribute.String("messaging.destination.name", p.Topic),
				attribute.Int("messaging.destination.partition.id", int(p.Partition)),
				attribute.String("messaging.consumer.group.name", group))
			if p.Lag >= 0 {
				o.ObserveInt64(lag, p.Lag, at)
			}
			if p.Committed >= 0 {
				o.ObserveInt64(committed, p.Committed, at)
			}
			o.ObserveInt64(buffered, int64(p.Buffered), at)
			o.ObserveInt64(inflight, int64(p.InFlight), at)
			o.ObserveInt64(paused, boolInt(p.Paused), at)
			o.ObserveInt64(stalled, boolInt(p.Stalled), at)
			o.ObserveInt64(blocked, boolInt(p.DeadLetterBlockedAt >= 0), at)
			o.ObserveFloat64(wmAge, p.WatermarkAge.Seconds(), at)
			if p.HeldAt >= 0 {
				o.ObserveInt64(heldAt, p.HeldAt, at)
			}
		}
		o.ObserveInt64(sessions, int64(st.ActiveSessions), out.group)
		o.ObserveFloat64(busy, st.Busy, out.group)
		if st.BusyRatio > 0 {
			o.ObserveFloat64(busyRatio, st.BusyRatio, out.group)
		}
		o.ObserveInt64(processed, st.Processed, out.group)
		o.ObserveInt64(retries, st.Retries, out.group)
		o.ObserveInt64(dlqFail, st.DeadLetterFailures, out.group)
		o.ObserveInt64(stalls, st.Stalls, out.group)
		o.ObserveInt64(rebalances, st.Rebalances, out.group)
		o.ObserveInt64(overruns, st.RevokeOverruns, out.group)
		o.ObserveInt64(holds, st.SilenceHolds, out.group)
		o.ObserveInt64(commitFail, st.CommitFailures, out.group)
		o.ObserveInt64(panics, st.Panics, out.group)
		o.ObserveInt64(truncations, st.Truncations, out.group)
		if st.Breaker.Enabled {
			o.ObserveInt64(brkOpen, boolInt(st.Breaker.Open), out.group)
			o.ObserveInt64(brkOpens, st.Breaker.Opens, out.group)
			o.ObserveInt64(brkExcused, st.Breaker.Excused, out.group)
			o.ObserveInt64(brkHung, st.Breaker.HungProbes, out.group)
		}
		for reason, n := range st.DeadLetteredByReason {
			o.ObserveInt64(dlq, n, metric.WithAttributes(attribute.String("lanes.dlq.reason", string(reason)),
				attribute.String("messaging.consumer.group.name", group)))
		}
		return nil
	}, lag, committed, buffered, inflight, paused, stalled, blocked, heldAt, sessions, wmAge, busy, busyRatio,
		processed, retries, dlq, dlqFail, stalls, rebalances, overruns, holds, commitFail, panics, truncations, brkOpen, brkOpens, brkExcused, brkHung)
	if err != nil {
		return nil, err
	}
	if out.parkReg, err = registerParkMetrics(m, stats, group); err != nil {
		return nil, err
	}
	out.txReg, err = registerTxMetrics(m, stats, group)
	return out, err
}

// handlerDone records an attempt that started at start, a stamp; the clock
// is read only when the histogram is enabled (a meter provider is set).
func (m *metrics) handlerDone(ctx context.Context, start int64) {
	if !m.handlerDur.Enabled(ctx) {
		return
	}
	m.handlerDur.Record(ctx, time.Duration(stampNow()-start).Seconds(), m.record...)
}

func (m *metrics) commitDone(d time.Duration) {
	m.commitDur.Record(context.Background(), d.Seconds(), m.record...)
}

func (m *metrics) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
	if m.parkReg != nil {
		_ = m.parkReg.Unregister()
	}
	if m.txReg != nil {
		_ = m.txReg.Unregister()
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
