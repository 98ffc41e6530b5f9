// Package tracing carries W3C trace context in Kafka record headers and
// creates the OpenTelemetry spans of a lanes pipeline: a "send" span
// (PRODUCER) per produced record, and a "process" span (CONSUMER) per
// handler attempt that links to the producer's context across the
// asynchronous Kafka hop (and, as an option, is its child).
//
// Spans follow the current OpenTelemetry messaging conventions
// (messaging.system=kafka, messaging.destination.name,
// messaging.destination.partition.id, messaging.kafka.offset,
// messaging.kafka.message.key, messaging.consumer.group.name,
// messaging.operation.type) plus lanes.session.id, lanes.event.id and
// lanes.attempt.
//
// With no tracer provider configured (the OpenTelemetry default), spans are
// no-ops: no attribute is built and no header is parsed, so the per-message
// cost stays negligible (see
// https://github.com/lanesdev/lanes/blob/main/docs/benchmarks.md#tracing-overhead).
//
// [Logger] adds trace_id, span_id, session_id and event_id to a zerolog
// logger, so log lines and traces join up.
package tracing
