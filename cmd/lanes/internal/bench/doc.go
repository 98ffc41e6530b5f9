// Package bench is "lanes-lab bench": lanes against raw franz-go polling, one
// goroutine per partition and a key-hash worker pool, in one run, on closed
// (preloaded backlog) and open (fixed send rate) workloads. bench.go parses
// the flags and runs the suite, workload.go defines the workloads,
// baselines.go the consumers compared, run.go runs one consumer on one
// workload, check.go is the order referee, report.go, plot.go and docs.go
// print the table, the plots and the docs/benchmarks.md section.
package bench
