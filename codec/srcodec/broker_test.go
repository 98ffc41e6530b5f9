package srcodec_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"github.com/lanesdev/lanes/codec/srcodec"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// TestRegistryOutageOnBroker runs a real consumer on the embedded broker
// with a reader (schema v2) that starts while the registry is down. Every
// record waits in its lane and is retried; once the registry answers they
// all decode (v1 data read as v2), nothing is lost or dead-lettered for
// the outage, and the session's order holds. A corrupt payload and one
// with an unknown schema ID are dead-lettered with reason decode, on their
// first attempt after the registry answered, and their sessions go on in
// order.
func TestRegistryOutageOnBroker(t *testing.T) {
	reg, cl := newRegistry(t)
	b, err := lanestest.NewBroker(3, "users", "users-dlq")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: b.Addrs(), Topic: "users"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	w := must(srcodec.New(cl, srcodec.TopicSubject("users"), must(avrocodec.New[UserV1](userV1))))
	l := lanestest.NewLedger()
	sessions := []string{"u-1", "u-2", "u-3", "u-4", "u-5"}
	const per = 12
	bad := map[string]string{} // event ID -> what is wrong
	for seq := range per {
		for i, s := range sessions {
			v := UserV1{Name: s, Age: int32(seq)}
			var res producer.Result
			switch {
			case s == "u-2" && seq == 4:
				payload := must(w.Encode(ctx, v))
				payload[0] = 1 // not the magic byte
				res, err = p.Send(ctx, s, payload, producer.WithSequence(uint64(seq)))
				bad[res.EventID] = "no schema-registry header"
			case s == "u-4" && seq == 9:
				payload := must(w.Encode(ctx, v))
				binary.BigEndian.PutUint32(payload[1:5], 4040)
				res, err = p.Send(ctx, s, payload, producer.WithSequence(uint64(seq)))
				bad[res.EventID] = "schema ID unknown to the registry"
			default:
				res, err = codec.Send(ctx, p, codec.Codec[UserV1](w), s, v, producer.WithSequence(uint64(seq)))
			}
			if err != nil {
				t.Fatalf("send %s/%d (%d): %v", s, seq, i, err)
			}
			l.Acked(s, seq, res.EventID)
		}
	}

	// Down from now until it has refused 8 requests.
	const refusals = 8
	reg.refuse.Store(refusals)
	r := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV2](userV2))))
	var decoded atomic.Int64
	h := codec.Typed(r, func(_ context.Context, m *consumer.Message, u UserV2) error {
		if u.Name != m.SessionID || u.Email != "unknown" {
			return fmt.Errorf("decoded %+v in a message of %s", u, m.SessionID)
		}
		decoded.Add(1)
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "users", Topics: []string{"users"},
		DeadLetterTopic: "users-dlq",
		Retry:           consumer.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxAttempts: 10_000}},
		l.Handler("m-1", h))
	if err != nil {
		t.Fatal(err)
	}
	if err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "users-dlq"}); err != nil {
		t.Fatal(err)
	}
	rep := l.Report()
	if err := rep.Err(false); err != nil {
		t.Fatal(err, rep.Details)
	}
	st := c.Stats()
	if rep.DeadLettered != 2 || st.DeadLettered != 2 || st.DeadLetteredByReason[consumer.ReasonDecode] != 2 {
		t.Fatalf("dead-lettered %d (%v), want the 2 bad payloads with reason decode", rep.DeadLettered, st.DeadLetteredByReason)
	}
	if reg.refuse.Load() > 0 || st.Retries < refusals {
		t.Fatalf("registry has %d refusals left, %d retries: the outage did not happen", reg.refuse.Load(), st.Retries)
	}
	if got := decoded.Load(); got != int64(len(sessions)*per-2) {
		t.Fatalf("decoded %d, want %d", got, len(sessions)*per-2)
	}
	dlq, err := lanestest.ReadDeadLetters(ctx, b, "users-dlq", lanestest.NewLedger())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dlq {
		reason, _ := eventid.Header(d, consumer.HeaderDLQReason)
		msg, _ := eventid.Header(d, consumer.HeaderDLQError)
		attempts, _ := eventid.Header(d, consumer.HeaderDLQAttempts)
		want, ok := bad[eventid.FromRecord(d)]
		if !ok || reason != string(consumer.ReasonDecode) || !strings.Contains(msg, want) || !strings.Contains(msg, "decode users partition") {
			t.Errorf("DLQ record %s: reason %q attempts %s error %q, want decode and %q", eventid.FromRecord(d), reason, attempts, msg, want)
		}
		// Retried only while the registry was down: a header error is
		// found before the registry is asked, so its first attempt is final.
		if want == "no schema-registry header" && attempts != "1" {
			t.Errorf("corrupt header dead-lettered after %s attempts, want 1", attempts)
		}
	}
}
