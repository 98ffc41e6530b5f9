// Package dlq is "lanes dlq inspect|replay": list the records of a
// dead-letter topic with where they came from, when and why (inspect.go),
// or send them back to their source topic with their event IDs
// (replay.go), each on its session's partition by its lanes-placement
// header. read.go reads the topic's committed records up to the last
// stable offsets seen at the start, within --timeout.
package dlq
