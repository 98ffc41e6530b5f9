// Package consumer runs the lanes per-session pipeline over a Kafka consumer group.
package consumer
