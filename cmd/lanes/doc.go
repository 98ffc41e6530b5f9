// Command lanes is the lanes command line: demo, broker and dlq.
package main
