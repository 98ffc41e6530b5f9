package consumer

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// parkAheadBytes bounds what a partition's read-ahead holds.
const parkAheadBytes = 1 << 20

// readAhead keeps the parked copies that a read of a parked head brought
// along (parkIO.readAt fetches up to parkFetchBytes from the head on): a
// session draining its parked records finds its next heads here instead
// of asking the broker once per record. A park partition's entries never
// change, so what is kept stays right; what it holds is bounded by
// parkAheadBytes per partition, and it goes with the partition.
type readAhead struct {
	mu    sync.Mutex
	recs  map[int64]*kgo.Record // by park offset
	bytes int
}

// take returns and forgets the copy at park offset off, if kept.
func (ra *readAhead) take(off int64) *kgo.Record {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	r := ra.recs[off]
	if r != nil {
		delete(ra.recs, off)
		ra.bytes -= recordBytes(r)
	}
	return r
}

// keep adds the parked copies among rs (markers are not retried), making
// room by forgetting what it held when they would not fit.
func (ra *readAhead) keep(rs []*kgo.Record) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for _, r := range rs {
		if !isParkCopy(r) || ra.recs[r.Offset] != nil {
			continue
		}
		n := recordBytes(r)
		if n > parkAheadBytes {
			continue
		}
		if ra.bytes+n > parkAheadBytes {
			clear(ra.recs)
			ra.bytes = 0
		}
		if ra.recs == nil {
			ra.recs = map[int64]*kgo.Record{}
		}
		ra.recs[r.Offset] = r
		ra.bytes += n
	}
}

// recordBytes is what a kept record holds.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// isParkCopy reports whether park partition record r is a parked copy.
func isParkCopy(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == HeaderParkKind {
			return string(h.Value) == parkKindNames[parkRecord]
		}
	}
	return false
}
