// Command lanes is the lanes command line, what a consumer's operator
// installs.
//
//	lanes broker  an embedded Kafka-compatible broker (kfake) on a port
//	lanes dlq     inspect or replay dead-lettered records
//	lanes park    inspect parked sessions, release a held one
//	lanes topics  create or check the dead-letter and park topics a
//	              consumer needs
//	lanes version the lanes version and the Go version that built it
//
// dlq, park and topics need --brokers.
//
// The chat demo and the benchmarks are a program of their own in this
// module, lanes-lab (./lanes-lab: lanes-lab demo, lanes-lab bench), so
// that lanes builds without gonum plot, pgx, go-redis and the
// OpenTelemetry SDK and exporters (TestLeanDeps keeps it so).
//
// Each command's code is in one folder with its tests: internal/dlq,
// internal/park and internal/topics, and lanes-lab's internal/demo (which
// runs its paced phase through bench) and internal/bench; internal/cli
// holds what they share (both programs' main, the help format, counts in
// words, the TLS and SASL flags) and internal/cli/clitest the checks both
// programs' tests run on their helps. This package is the dispatcher
// (main.go), lanes broker (broker.go) and lanes version (version.go).
package main
