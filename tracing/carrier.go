package tracing

import (
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
	for _, h := range c.r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set sets header key, replacing any header of that name.
func (c Carrier) Set(key, value string) {
	out := c.r.Headers[:0]
	for _, h := range c.r.Headers {
		if h.Key != key {
			out = append(out, h)
		}
	}
	c.r.Headers = append(out, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys returns the header names.
func (c Carrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}
