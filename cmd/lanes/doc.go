// Command lanes is the lanes command line: demo, bench, broker and dlq.
package main
