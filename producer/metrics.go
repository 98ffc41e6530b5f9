package producer

import (
	"context"
	"time"

	"github.com/lanesdev/lanes/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics: lanes.producer.send.duration (histogram, s, from SendAsync to
// the broker's answer) and lanes.producer.sends (counter, by outcome).
type metrics struct {
	dur              metric.Float64Histogram
	sends            metric.Int64Counter
	okRec, failedRec []metric.RecordOption // prebuilt: no allocation per send
	okAdd, failedAdd []metric.AddOption
}

func newMetrics(cfg Config) (*metrics, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(tracing.ScopeName)
	dur, err := m.Float64Histogram("lanes.producer.send.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from SendAsync to the broker's acknowledgement or error."))
	if err != nil {
		return nil, err
	}
	sends, err := m.Int64Counter("lanes.producer.sends", metric.WithDescription("Messages sent, by outcome (ok, error)."))
	if err != nil {
		return nil, err
	}
	set := func(outcome string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("messaging.destination.name", cfg.Topic),
			attribute.String("lanes.outcome", outcome)))
	}
	ok, failed := set("ok"), set("error")
	return &metrics{dur: dur, sends: sends, okRec: []metric.RecordOption{ok}, failedRec: []metric.RecordOption{failed},
		okAdd: []metric.AddOption{ok}, failedAdd: []metric.AddOption{failed}}, nil
}

func (m *metrics) sendDone(d time.Duration, err error) {
	rec, add := m.okRec, m.okAdd
	if err != nil {
		rec, add = m.failedRec, m.failedAdd
	}
	m.dur.Record(context.Background(), d.Seconds(), rec...)
	m.sends.Add(context.Background(), 1, add...)
}
