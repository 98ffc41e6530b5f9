// Command lanes is the lanes command line.
//
//	lanes demo    the chat demo: a burst of conversations through a lanes
//	              consumer with injected faults, an order and loss referee,
//	              a one-goroutine-per-partition baseline, and a paced phase
//	              whose latency is measured from each message's intended
//	              send time
//	lanes bench   lanes against raw franz-go polling, one goroutine per
//	              partition and a key-hash worker pool, in one run, on
//	              closed (preloaded backlog) and open (fixed send rate)
//	              workloads: msgs/s, ratio to the bound, latency, order
//	              violations, allocations, heap, goroutines; a table,
//	              --json, --plots DIR and --docs FILE
//	lanes broker  an embedded Kafka-compatible broker (kfake) on a port
//	lanes dlq     inspect or replay dead-lettered records
//	lanes park    inspect parked sessions
//	lanes topics  create or check the dead-letter and park topics a
//	              consumer needs
//	lanes version the lanes version and the Go version that built it
//
// Every command runs on an embedded broker unless given --brokers (dlq,
// park and topics need --brokers).
//
// Each command's code is in one folder with its tests: internal/bench,
// internal/demo (which runs its paced phase through bench) and
// internal/dlq, internal/park and internal/topics; internal/cli holds what they share (the help format, counts in words, the TLS and SASL flags).
// This package is the dispatcher (main.go), lanes broker (broker.go) and
// lanes version (version.go).
package main
