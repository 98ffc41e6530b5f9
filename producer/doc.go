// Package producer sends session-keyed messages to Kafka for lanes.
package producer
