// Package tracing will carry W3C trace context in Kafka record headers and
// create OpenTelemetry send and process spans linked across the Kafka hop,
// with zerolog fields for trace, span, session and event IDs.
//
// It is a placeholder until the tracing work lands; nothing is exported yet.
package tracing
