package consumer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// TestParkCopyEstimate: parkwire.EncodedSize never underestimates. A record whose
// estimate is exactly a topic's max.message.bytes is accepted by franz-go
// with that batch limit and by the broker, whatever its shape (a large
// value, many headers, a long key, nothing but headers).
func TestParkCopyEstimate(t *testing.T) {
	const limit = 20000
	e := newEnv(t, 1)
	e.createTopic("sized", strconv.Itoa(limit))
	cl := e.client(kgo.ProducerBatchMaxBytes(limit), kgo.ProducerBatchCompression(kgo.NoCompression()))
	many := make([]kgo.RecordHeader, 200)
	for i := range many {
		many[i] = kgo.RecordHeader{Key: "h" + strconv.Itoa(i), Value: []byte("v")}
	}
	for _, shape := range []kgo.Record{
		{Key: []byte("k")},
		{Key: []byte("k"), Headers: many[:12]},
		{Key: bytes.Repeat([]byte("k"), 300), Headers: many},
		{Headers: many},
	} {
		r := shape
		r.Topic = "sized"
		r.Value = randomBytes(limit - parkwire.EncodedSize(&r))
		if n := parkwire.EncodedSize(&r); n != limit {
			t.Fatalf("estimate %d; want %d", n, limit)
		}
		if err := cl.ProduceSync(context.Background(), &r).FirstErr(); err != nil {
			t.Fatalf("a record estimated at the limit (key %d, value %d bytes, %d headers) refused: %v",
				len(r.Key), len(r.Value), len(r.Headers), err)
		}
	}
}

// TestParkLargeRecord: a record near 1 MB, which its source topic took,
// is parked and retried. Its copy is written whole when it fits the park
// topic's max.message.bytes (the park client's batch limit follows it);
// when it cannot, a stub is written, and its retry reads the record from
// its source partition: the handler sees the same record both times. A
// stub whose source record is gone too is dead-lettered as lost.
func TestParkLargeRecord(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parkLimit  string // the park topic's max.message.bytes; "": Kafka's default
		size       int
		stub       bool
		sourceGone bool
	}{
		{"near 1 MB: parked whole", "", 1_040_000, false, false},
		{"at the source topic's limit: a stub", "", defaultMaxMessageBytes - 200, true, false},
		{"the park topic's limit lower: a stub", "100000", 300_000, true, false},
		{"a stub whose source record is gone: lost", "100000", 300_000, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "dlq")
			e.createTopic("chats.park", tc.parkLimit)
			gone := kafkaOutOfRange(t, e)
			big := &kgo.Record{Topic: "chats", Key: []byte("big"), Value: append([]byte("big|0|"), randomBytes(tc.size-6)...),
				Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("t9")}, {Key: "lanes-event-id", Value: []byte("ev-big")}}}
			cl := e.client(kgo.ProducerBatchMaxBytes(2 << 20))
			if err := cl.ProduceSync(context.Background(), big).FirstErr(); err != nil {
				t.Fatalf("the source topic refused the record: %v", err)
			}
			e.produceValues("chats", "big|1", "other|0")
			var mu sync.Mutex
			var seen []string // the calls of session big
			want := 3         // big|0, big|1, other|0
			if tc.sourceGone {
				want = 2
			}
			rec := newRecorder(want, func(_ context.Context, m *Message) error {
				if m.SessionID != "big" {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, describeSized(m))
				if len(seen) == 1 {
					return Park(errors.New("its backend is down"))
				}
				return nil
			})
			c, stop := startDueByHand(t, e, "g-park-large", rec, nil)
			waitFor(t, "the record parked, or its park write failing", func() bool {
				return parkedRecords(c) == 2 || parkWriteError(c) != ""
			}, func() string { return parkWriteError(c) })
			if err := parkWriteError(c); err != "" {
				t.Fatalf("the park write fails: %s", err)
			}
			copies := readParkCopies(t, e, 2)
			if cp := copies[0]; parkwire.IsStub(cp) != tc.stub || headerOf(cp, parkwire.HeaderOffset) != "0" || string(cp.Key) != "big" ||
				(tc.stub && (cp.Value != nil || headerOf(cp, "tenant") != "")) || (!tc.stub && !bytes.Equal(cp.Value, big.Value)) {
				t.Fatalf("park copy: stub %v, %d bytes, headers %v; want stub %v", parkwire.IsStub(cp), len(cp.Value), cp.Headers, tc.stub)
			}
			if tc.sourceGone {
				gone("chats", deleteThrough(t, e, "chats"))
			}
			makeDue(t, c, "big")
			finishUnparked(t, c, rec, stop)
			mu.Lock()
			defer mu.Unlock()
			if tc.sourceGone {
				dl := readDLQ(t, e, 1)[0]
				if headerOf(dl, HeaderDLQReason) != string(ReasonParkLost) || headerOf(dl, HeaderDLQOffset) != "0" || len(seen) != 2 {
					t.Fatalf("dead-lettered %v after %d calls; want the loss of offset 0 (park-lost), then big|1", dl.Headers, len(seen))
				}
				return
			}
			if len(seen) != 3 || seen[0] != seen[1] || !strings.Contains(seen[2], "@1 ") {
				t.Fatalf("the calls of session big:\n%s\nwant big|0 twice alike, then big|1", strings.Join(seen, "\n"))
			}
		})
	}
}

// TestParkWriteFailureReported: a park write that fails (the park topic
// refuses it) shows in PartitionStats.Park.WriteError and in Health,
// naming the partition, the park partition and the error, and in the log
// once (not once per retry); all clear once the write succeeds, and the
// record is parked and retried.
func TestParkWriteFailureReported(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	e.produceValues("chats", "a|0")
	refuse, refused := e.refuseWrites("chats.park")
	var logs syncBuffer
	lg := zerolog.New(&logs)
	var calls atomic.Int32
	rec := newRecorder(1, func(context.Context, *Message) error {
		if calls.Add(1) == 1 {
			refuse.Store(true) // after the rebuild: its fence was written
			return Park(errors.New("its backend is down"))
		}
		return nil
	})
	cfg := e.config("g-park-write-fails", "chats")
	cfg.Logger = &lg
	cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "several park writes refused", func() bool { return refused.Load() >= 3 })
	eventually(t, "the failure in Stats", func() bool { return parkWriteError(c) != "" })
	if err := parkWriteError(c); !strings.Contains(err, "chats.park/0") || !strings.Contains(err, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("WriteError %q; want the park partition and the error", err)
	}
	h := c.Health()
	if reasons := strings.Join(h.Reasons, "\n"); h.Ready || !strings.Contains(reasons, "chats/0 park writes failing") ||
		!strings.Contains(reasons, "chats.park/0") || !strings.Contains(reasons, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("health %+v; want not ready, naming chats/0, chats.park/0 and the error", h)
	}
	if n := bytes.Count(logs.Bytes(), []byte("write to the park topic failed")); n != 1 {
		t.Fatalf("%d log lines about the failing write after %d refusals; want 1", n, refused.Load())
	}
	refuse.Store(false)
	rec.wait(t)
	eventually(t, "ready again", func() bool { return c.Health().Ready && parkWriteError(c) == "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d handler calls; want 2 (parked, then retried)", n)
	}
}

// parkWriteError is the first partition's failing park write, if any.
func parkWriteError(c *Consumer) string {
	for _, p := range c.Stats().Partitions {
		if p.Park.WriteError != "" {
			return p.Park.WriteError
		}
	}
	return ""
}

// refuseWrites answers the produce requests to topic with
// TOPIC_AUTHORIZATION_FAILED while on is set, counting them in refused.
func (e *env) refuseWrites(topic string) (on *atomic.Bool, refused *atomic.Int64) {
	on = new(atomic.Bool)
	refused = e.answerProduce(topic, func([]byte) int16 {
		if on.Load() {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
	return on, refused
}

// readParkCopies reads the first n parked copies (kind record) of
// chats.park.
func readParkCopies(t *testing.T, e *env, n int) []*kgo.Record {
	t.Helper()
	cl := e.client(kgo.ConsumeTopics("chats.park"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("park topic: %d copies, want %d", len(out), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if headerOf(r, parkwire.HeaderKind) == "record" {
				out = append(out, r)
			}
		})
	}
	return out
}

// describeSized is describe with the value summed up: its size and hash.
func describeSized(m *Message) string {
	r := *m.Record
	sum := sha256.Sum256(r.Value)
	r.Value = fmt.Appendf(nil, "%d bytes %x", len(r.Value), sum[:8])
	return describe(&Message{Record: &r, EventID: m.EventID, SessionID: m.SessionID})
}

// randomBytes returns n bytes that do not compress.
func randomBytes(n int) []byte {
	b := make([]byte, max(n, 0))
	rng := rand.New(rand.NewPCG(uint64(n), 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestParkWriteReasonTopicMadeAgain: a park write failing because its park
// topic was deleted (franz-go writes under the topic ID it learnt first)
// says what happened and what to do, not to check the topic's settings.
func TestParkWriteReasonTopicMadeAgain(t *testing.T) {
	ps := PartitionStats{Topic: "chats", Partition: 3, Park: ParkStats{WriteFailingFor: 2 * time.Second,
		WriteError: "write chats.park/3: " + kerr.UnknownTopicID.Error()}}
	if r := parkWriteReason(ps); !strings.Contains(r, "park topic was deleted") || !strings.Contains(r, "restart this member") {
		t.Fatalf("reason %q; want the park topic deleted named and a restart advised", r)
	}
	ps.Park.WriteError = "write chats.park/3: " + kerr.MessageTooLarge.Error()
	if r := parkWriteReason(ps); strings.Contains(r, "deleted") || !strings.Contains(r, "max.message.bytes") {
		t.Fatalf("reason %q; want the topic's settings named", r)
	}
}
