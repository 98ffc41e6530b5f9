package codec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type order struct {
	Session string `json:"session"`
	Seq     int    `json:"seq"`
	Item    string `json:"item"`
}

func TestJSONRoundTrip(t *testing.T) {
	c := codec.JSON[order]()
	in := order{Session: "s", Seq: 3, Item: "tea"}
	b, err := c.Encode(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"session":"s","seq":3,"item":"tea"}` {
		t.Fatalf("encoded %s", b)
	}
	out, err := c.Decode(context.Background(), b)
	if err != nil || out != in {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	for _, bad := range []string{"", "{", `{"seq":"three"}`, "\x00\x00\x00\x00\x01"} {
		if _, err := c.Decode(context.Background(), []byte(bad)); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("Decode(%q) = %v, want ErrDecode", bad, err)
		}
	}
	if _, err := codec.JSON[chan int]().Encode(context.Background(), make(chan int)); !errors.Is(err, codec.ErrEncode) {
		t.Errorf("Encode(chan) = %v, want ErrEncode", err)
	}
}

// flaky is a Codec whose decodes fail with ErrUnavailable while down is set.
type flaky struct {
	codec.Codec[order]
	down     atomic.Bool
	failures atomic.Int64
}

func (f *flaky) Decode(ctx context.Context, b []byte) (order, error) {
	if f.down.Load() {
		f.failures.Add(1)
		return order{}, fmt.Errorf("registry at 127.0.0.1:1: %w", codec.ErrUnavailable)
	}
	return f.Codec.Decode(ctx, b)
}

func TestTypedClassifies(t *testing.T) {
	f := &flaky{Codec: codec.JSON[order]()}
	var got order
	h := codec.Typed[order](f, func(_ context.Context, _ *consumer.Message, v order) error { got = v; return nil })
	msg := func(v string) *consumer.Message {
		return &consumer.Message{Record: &kgo.Record{Topic: "orders", Partition: 2, Offset: 9, Value: []byte(v)}}
	}
	ctx := context.Background()
	if err := h.Handle(ctx, msg(`{"item":"tea"}`)); err != nil || got.Item != "tea" {
		t.Fatalf("Handle = %v, got %+v", err, got)
	}
	err := h.Handle(ctx, msg("not json"))
	if !consumer.IsPermanent(err) || !errors.Is(err, codec.ErrDecode) || !strings.Contains(err.Error(), "orders partition 2 offset 9") {
		t.Fatalf("corrupt payload: %v, want a permanent ErrDecode naming the record", err)
	}
	f.down.Store(true)
	if err := h.Handle(ctx, msg(`{}`)); consumer.IsPermanent(err) || !errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("registry down: %v, want a retriable ErrUnavailable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := h.Handle(cctx, msg(`{}`)); consumer.IsPermanent(err) {
		t.Fatalf("cancelled attempt: %v, want retriable", err)
	}
}

// TestTypedOnBroker: typed sends and a typed handler through a real
// consumer on the embedded broker. A corrupt payload is dead-lettered at
// once with reason decode and the decode error; a codec that cannot reach
// its registry for a while delays the records but loses and dead-letters
// none; every session keeps its order (the Ledger checks every message).
func TestTypedOnBroker(t *testing.T) {
	b, err := lanestest.NewBroker(3, "orders", "orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	f := &flaky{Codec: codec.JSON[order]()}
	f.down.Store(true) // down when the consumer starts; up after some failures
	l := lanestest.NewLedger()
	sessions := []string{"s-1", "s-2", "s-3", "s-4"}
	const per = 15
	corrupt := map[string]bool{}
	for seq := range per {
		for _, s := range sessions {
			var res producer.Result
			if s == "s-2" && seq == 7 {
				res, err = p.Send(ctx, s, []byte("{truncated"), producer.WithSequence(uint64(seq)))
				corrupt[res.EventID] = true
			} else {
				res, err = codec.Send(ctx, p, f.Codec, s, order{Session: s, Seq: seq}, producer.WithSequence(uint64(seq)))
			}
			if err != nil {
				t.Fatal(err)
			}
			l.Acked(s, seq, res.EventID)
		}
	}
	h := codec.Typed[order](f, func(_ context.Context, m *consumer.Message, v order) error {
		if v.Session != m.SessionID {
			return fmt.Errorf("decoded session %q in a message of %q", v.Session, m.SessionID)
		}
		return nil
	})
	// The registry comes back after five failed decodes.
	up := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if f.failures.Load() >= 5 {
			f.down.Store(false)
		}
		return h.Handle(ctx, m)
	})
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "orders", Topics: []string{"orders"},
		DeadLetterTopic: "orders-dlq", Retry: consumer.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxAttempts: 1000}},
		l.Handler("m-1", up))
	if err != nil {
		t.Fatal(err)
	}
	if err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "orders-dlq"}); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	if err := r.Err(false); err != nil {
		t.Fatal(err, r.Details)
	}
	if r.DeadLettered != 1 || f.failures.Load() < 5 {
		t.Fatalf("dead-lettered %d, want 1 (the corrupt payload); %d decodes failed while down", r.DeadLettered, f.failures.Load())
	}
	st := c.Stats()
	if st.DeadLetteredByReason[consumer.ReasonDecode] != 1 {
		t.Fatalf("dead letters by reason %v, want one decode", st.DeadLetteredByReason)
	}
	dlq, err := lanestest.ReadDeadLetters(ctx, b, "orders-dlq", lanestest.NewLedger())
	if err != nil || len(dlq) != 1 {
		t.Fatalf("DLQ: %d records, %v", len(dlq), err)
	}
	d := dlq[0]
	reason, _ := eventid.Header(d, consumer.HeaderDLQReason)
	msg, _ := eventid.Header(d, consumer.HeaderDLQError)
	attempts, _ := eventid.Header(d, consumer.HeaderDLQAttempts)
	if !corrupt[eventid.FromRecord(d)] || reason != string(consumer.ReasonDecode) || attempts != "1" ||
		!strings.Contains(msg, "codec: decode orders partition") || !strings.Contains(msg, "json") {
		t.Fatalf("DLQ record: reason %q attempts %q error %q", reason, attempts, msg)
	}
}
