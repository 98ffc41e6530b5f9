package parkahead

import (
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// fetchBytes is what the consumer's park client asks of one fetch
// (consumer.parkFetchBytes).
const fetchBytes = 64 << 10

// TestBounded: the read-ahead keeps parked copies only, each once,
// at most MaxBytes of them.
func TestBounded(t *testing.T) {
	copyAt := func(off int64, size int) *kgo.Record {
		return &kgo.Record{Offset: off, Value: make([]byte, size),
			Headers: []kgo.RecordHeader{{Key: parkwire.HeaderKind, Value: []byte("record")}}}
	}
	marker := &kgo.Record{Offset: 3, Headers: []kgo.RecordHeader{{Key: parkwire.HeaderKind, Value: []byte("done")}}}
	var ra ReadAhead
	ra.Keep([]*kgo.Record{copyAt(1, 10), copyAt(2, 10), marker, copyAt(4, MaxBytes+1)})
	if ra.Take(3) != nil || ra.Take(4) != nil {
		t.Fatal("kept a marker or a copy larger than the bound")
	}
	if ra.Take(1) == nil || ra.Take(1) != nil {
		t.Fatal("a kept copy is taken once")
	}
	ra.Keep([]*kgo.Record{copyAt(5, MaxBytes-300)}) // with copy 2 kept, over the bound
	if ra.Take(2) != nil || ra.Take(5) == nil || ra.Bytes() != 0 {
		t.Fatalf("over the bound the older copies go: %d bytes left", ra.Bytes())
	}
}

// TestKeepsItsOwnCopies: a record decoded from a fetch of
// uncompressed batches points into the fetch's whole response (up to
// fetchBytes and more): kept as it is, one small copy would hold that
// response in memory, and the read-ahead's bound would bound nothing (a
// partition whose heads keep failing held tens of megabytes while counting
// under one). The read-ahead keeps copies of its own, and counts them.
func TestKeepsItsOwnCopies(t *testing.T) {
	fetched := make([]byte, fetchBytes) // one fetch's response
	copy(fetched, "key-value-header")
	rs := []*kgo.Record{{Offset: 7, Key: fetched[0:3:3], Value: fetched[4:9:9], Headers: []kgo.RecordHeader{
		{Key: parkwire.HeaderKind, Value: []byte("record")}, {Key: "h", Value: fetched[10:16:16]}}}}
	var ra ReadAhead
	ra.Keep(rs)
	clear(fetched) // the response reused or overwritten: the copy must not change
	r := ra.Take(7)
	if r == nil || string(r.Key) != "key" || string(r.Value) != "value" || string(r.Headers[1].Value) != "header" {
		t.Fatalf("kept %+v: it shares the fetch's memory", r)
	}
	ra.Keep(rs)
	if min := int(unsafe.Sizeof(kgo.Record{})); ra.Bytes() < min {
		t.Fatalf("a kept record counts %d bytes; it holds at least %d", ra.Bytes(), min)
	}
}
