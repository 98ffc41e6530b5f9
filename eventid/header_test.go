package eventid

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestHeaders(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: "other", Value: []byte("x")},
		{Key: HeaderEventID, Value: []byte("old-1")},
		{Key: HeaderEventID, Value: []byte("old-2")},
	}}
	if got := FromRecord(r); got != "old-1" {
		t.Fatalf("FromRecord = %q, want first header old-1", got)
	}
	Stamp(r, "new-id", "chat-9")
	if got := FromRecord(r); got != "new-id" {
		t.Fatalf("after Stamp FromRecord = %q", got)
	}
	if got := SessionFromRecord(r); got != "chat-9" {
		t.Fatalf("SessionFromRecord = %q", got)
	}
	n := 0
	for _, h := range r.Headers {
		if h.Key == HeaderEventID {
			n++
		}
	}
	if n != 1 || len(r.Headers) != 3 {
		t.Fatalf("headers after Stamp: %+v", r.Headers)
	}
	if v, ok := Header(r, "other"); !ok || v != "x" {
		t.Fatalf("unrelated header lost: %q %v", v, ok)
	}
	if _, ok := Header(&kgo.Record{}, HeaderEventID); ok {
		t.Fatal("Header on empty record reported present")
	}
	if FromRecord(&kgo.Record{}) != "" {
		t.Fatal("absent event ID is not empty")
	}
}
