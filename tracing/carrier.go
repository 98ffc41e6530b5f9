package tracing

import (
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// Carrier adapts a record's headers to propagation.TextMapCarrier, so any
// OpenTelemetry propagator (W3C traceparent/tracestate by default) can read
// and write trace context on Kafka records.
type Carrier struct{ r *kgo.Record }

var _ propagation.TextMapCarrier = Carrier{}

// NewCarrier returns a carrier over r's headers.
func NewCarrier(r *kgo.Record) Carrier { return Carrier{r: r} }

// Get returns the value of the first header named key, or "".
func (c Carrier) Get(key string) string {
	v, _ := eventid.Header(c.r, key)
	return v
}

// Set sets header key, replacing any header of that name.
func (c Carrier) Set(key, value string) { eventid.SetHeader(c.r, key, value) }

// Keys returns the header names.
func (c Carrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}
