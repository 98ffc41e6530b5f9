package consumer

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The park writes of one partition failing now, as its PartitionStats and
// Health show them; the writes themselves are park_write.go's.

// parkWriteFails are the park writes of one partition failing now (a
// parked copy or a marker, each retried by parkWrite until it succeeds or
// the partition is fenced): what PartitionStats.Park.WriteError and Health
// report, like a failing dead-letter write.
type parkWriteFails struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]parkWriteFail
}

type parkWriteFail struct {
	err   string    // the last error, naming the park partition
	since time.Time // when the write first failed
}

// failed records that write id (0: a write not failing before) failed
// with err, and returns its id and since when it fails.
func (f *parkWriteFails) failed(id uint64, err string, now time.Time) (uint64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[uint64]parkWriteFail{}
	}
	if id == 0 {
		f.next++
		id = f.next
	}
	w, ok := f.m[id]
	if !ok {
		w.since = now
	}
	w.err = err
	f.m[id] = w
	return id, w.since
}

// ended forgets write id: it succeeded, or was given up with its partition.
func (f *parkWriteFails) ended(id uint64) {
	f.mu.Lock()
	delete(f.m, id)
	f.mu.Unlock()
}

// fill sets ps's write error: the write failing for the longest.
func (f *parkWriteFails) fill(ps *ParkStats, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first parkWriteFail
	for _, w := range f.m {
		if first.since.IsZero() || w.since.Before(first.since) {
			first = w
		}
	}
	if !first.since.IsZero() {
		ps.WriteError, ps.WriteFailingFor = first.err, now.Sub(first.since)
	}
}

// parkWriteReason is Health's reason about ps's failing park writes; ""
// when none fails.
func parkWriteReason(ps PartitionStats) string {
	if ps.Park.WriteError == "" {
		return ""
	}
	do := "check that the park topic exists, accepts this member's writes and its max.message.bytes"
	if strings.Contains(ps.Park.WriteError, kerr.UnknownTopicID.Message) {
		// franz-go writes under the topic ID it learnt first, for as long
		// as the client lives.
		do = "the park topic was deleted, perhaps made again: what was parked in it is gone; once it exists, restart this member (its partitions' next take-up fences the new park topic)"
	}
	return fmt.Sprintf("%s/%d park writes failing for %v: %s: what waits for them holds the partition (a record to park holds its watermark, a parked session its retries); %s",
		ps.Topic, ps.Partition, ps.Park.WriteFailingFor.Round(time.Second), ps.Park.WriteError, do)
}
