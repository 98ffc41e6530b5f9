// Package offsets owns what one partition's commit says: the tracker that
// follows each fetched offset to done and yields the contiguous watermark,
// and the commit metadata that lists the offsets done above it, so that
// the next owner skips them instead of running them again
// (https://github.com/lanesdev/lanes/blob/main/docs/design.md#the-partition-consumerpartitiongo).
//
// A Tracker is fed in offset order (Fetched), told what finished (Done),
// and asked what to commit (Watermark, Completed). EncodeMetadata and
// DecodeMetadata are the "lanes1:" wire format of the commit's metadata
// string; a Skipper walks what DecodeMetadata read as the next owner's
// records arrive. Nothing here does I/O or locks: the consumer's
// partition guards a Tracker with its mutex.
package offsets
