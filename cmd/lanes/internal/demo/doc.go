// Package demo is "lanes-lab demo": a chat service end to end. A producer sends
// conversations across many sessions while a lanes consumer with injected
// faults (checker.go) handles them; every message of every session is
// checked for order and loss (report.go). Then a one-goroutine-per-partition
// baseline (baseline.go) and a paced phase (paced.go, the open mode of
// lanes-lab bench) run on the same broker. dedup.go is --dedup: a crash and
// restart with a dedup store; observe.go is --trace and --metrics-addr.
package demo
