package parkwire

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// TestParkEntryRoundTrip: a parked copy keeps key, value, headers and event
// ID and carries its provenance; markers carry their session and through;
// the rebuild reads back exactly what was written.
func TestParkEntryRoundTrip(t *testing.T) {
	w := Writer{Group: "chat", Suffix: ".park"}
	src := &kgo.Record{Topic: "chats", Partition: 3, Offset: 77, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "lanes-event-id", Value: []byte("id-1")}, {Key: "traceparent", Value: []byte("tp")}}}
	first := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cp := w.Copy(src, "k", 12, 4, first, first.Add(time.Second), "dependency down")
	if cp.Topic != "chats.park" || cp.Partition != 3 || string(cp.Key) != "k" || string(cp.Value) != "v" {
		t.Fatalf("copy %s/%d key %q value %q", cp.Topic, cp.Partition, cp.Key, cp.Value)
	}
	for k, want := range map[string]string{HeaderTopic: "chats", HeaderPartition: "3", HeaderOffset: "77",
		HeaderAttempts: "4", HeaderFirstFailure: "2026-01-02T03:04:05.000000006Z",
		HeaderNotBefore: "2026-01-02T03:04:06.000000006Z", HeaderReason: "dependency down", HeaderEpoch: "12", HeaderGroup: "chat"} {
		if got := headerOf(cp, k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	cp.Offset = 500
	e, rec, err := Parse(cp)
	if err != nil || e != (parkset.Entry{Kind: parkset.KindRecord, Session: "k", Src: 77, Epoch: 12, Gen: -1, Group: "chat"}) {
		t.Fatalf("parse copy: %+v, %v", e, err)
	}
	if rec.Topic != "chats" || rec.Partition != 3 || rec.Offset != 77 || len(rec.Headers) != 2 || headerOf(rec, "lanes-event-id") != "id-1" {
		t.Fatalf("the handler would see %+v", rec)
	}
	for _, kind := range []parkset.Kind{parkset.KindDone, parkset.KindHold} {
		e, _, err := Parse(w.Marker(kind, "chats", 3, "k", 90, 12))
		want := parkset.Entry{Kind: kind, Session: "k", Src: 90, Epoch: 12, Gen: -1, Group: "chat"}
		if err != nil || e != want {
			t.Errorf("parse %c marker: %+v, %v; want %+v", kind, e, err, want)
		}
	}
	if e, _, err := Parse(w.Fence("chats", 3, 2, "consumer", "00ab", true)); err != nil || !e.Reset || e.Gen != 2 || e.Proto != "consumer" {
		t.Errorf("parse reset fence: %+v, %v", e, err)
	}
	f := w.Fence("chats", 3, 7, "classic", "00ab", false)
	if f.Topic != "chats.park" || f.Partition != 3 || f.Key != nil {
		t.Fatalf("fence %s/%d key %q", f.Topic, f.Partition, f.Key)
	}
	if e, _, err := Parse(f); err != nil || e != (parkset.Entry{Kind: parkset.KindFence, Epoch: -1, Gen: 7, Proto: "classic", Group: "chat", TopicID: "00ab"}) {
		t.Errorf("parse fence: %+v, %v", e, err)
	}
	if _, _, err := Parse(&kgo.Record{Value: []byte("x")}); err == nil {
		t.Error("a foreign record parsed as a park entry")
	}
}

// TestParkFit: a copy that fits its park topic is written whole; one just
// over it has its lanes-park-reason cut; one that cannot fit becomes a
// stub: its key and provenance, without its value or its own headers.
func TestParkFit(t *testing.T) {
	w, limits := Writer{Suffix: ".park"}, &Limits{Default: 1048588}
	limits.Learn("chats.park", 5000)
	fitted := func(cp *kgo.Record) (*kgo.Record, bool, int, int) {
		rec, stub, size := Fit(cp, limits.Limit(cp.Topic))
		return rec, stub, size, limits.Limit(cp.Topic)
	}
	src := &kgo.Record{Topic: "chats", Partition: 1, Offset: 9, Key: []byte("k"),
		Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("t9")}}}
	reason := strings.Repeat("r", 1000)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	copyOf := func(n int) *kgo.Record {
		src.Value = randomBytes(n)
		return w.Copy(src, "k", 3, 2, at, at, reason)
	}
	base := EncodedSize(copyOf(0))
	if rec, stub, _, _ := fitted(copyOf(5000 - base)); stub || len(Value(rec, HeaderReason)) != 1000 {
		t.Fatalf("a copy at the limit: stub %v, reason %d bytes; want it whole", stub, len(Value(rec, HeaderReason)))
	}
	rec, stub, _, _ := fitted(copyOf(5000 - base + 300))
	if stub || len(Value(rec, HeaderReason)) != 700 || len(rec.Value) != 5000-base+300 || EncodedSize(rec) > 5000 {
		t.Fatalf("a copy 300 bytes over: stub %v, reason %d bytes; want the reason cut to 700", stub, len(Value(rec, HeaderReason)))
	}
	rec, stub, _, _ = fitted(copyOf(6000))
	if !stub || !IsStub(rec) || rec.Value != nil || string(rec.Key) != "k" || headerOf(rec, "tenant") != "" ||
		headerOf(rec, HeaderOffset) != "9" || headerOf(rec, HeaderAttempts) != "2" || EncodedSize(rec) > 5000 {
		t.Fatalf("a copy that cannot fit: %v %q %v; want a stub with key and provenance", stub, rec.Value, rec.Headers)
	}
	e, got, err := Parse(rec)
	if err != nil || e.Kind != parkset.KindRecord || e.Src != 9 || got.Offset != 9 || len(got.Headers) != 0 {
		t.Fatalf("the stub reads back as %+v %+v, %v", e, got, err)
	}
}

func headerOf(r *kgo.Record, k string) string { return string(Value(r, k)) }

func randomBytes(n int) []byte {
	b := make([]byte, max(n, 0))
	rng := rand.New(rand.NewPCG(uint64(n), 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
