// Package integration holds lanes' end-to-end tests: producer and consumer
// together, checked by the lanestest kit's ledger, on the embedded broker
// (kfake) or on real Apache Kafka when LANES_BROKERS is set, and the
// real-broker launcher (kafka/kafka.sh with cmd/brokerready).
package integration
