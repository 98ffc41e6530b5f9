// Package integration holds lanes' end-to-end tests: producer and consumer
// together, the scenario harness with its order and loss verifier, and the
// broker launchers (embedded kfake, and real Apache Kafka when LANES_BROKERS
// is set).
package integration
