// Command lanes-lab runs the chat demo and the benchmarks of lanes.
//
//	lanes-lab demo   the chat demo: a burst of conversations through a
//	                 lanes consumer with injected faults, an order and
//	                 loss referee, a one-goroutine-per-partition baseline,
//	                 and a paced phase whose latency is measured from each
//	                 message's intended send time
//	lanes-lab bench  lanes against raw franz-go polling, one goroutine per
//	                 partition and a key-hash worker pool, in one run, on
//	                 closed (preloaded backlog) and open (fixed send rate)
//	                 workloads: msgs/s, ratio to the bound, latency, order
//	                 violations, allocations, heap, goroutines; a table,
//	                 --json, --plots DIR and --docs FILE
//
// Both run on an embedded broker unless given --brokers.
//
// It is a second main package of the module github.com/lanesdev/lanes/cmd/lanes,
// released with it at one version:
//
//	go install github.com/lanesdev/lanes/cmd/lanes/lanes-lab@VERSION
//
// It is apart from the lanes command (cmd/lanes), which an operator
// installs, because the demo and the benchmarks need what lanes does not:
// gonum plot and its fonts (bench --plots, --docs), pgx and go-redis (demo
// --dedup) and the OpenTelemetry SDK and Prometheus exporters (demo
// --trace, --metrics-addr). Module graph pruning keeps `go install
// .../cmd/lanes@VERSION` from downloading or building them.
//
// The commands' code is in ../internal/demo and ../internal/bench; this
// package is the dispatcher (main.go), on cli.Main like lanes.
package main
