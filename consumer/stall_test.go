package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceValues writes records keyed by the session part of "session|seq".
func (e *env) produceValues(topic string, values ...string) {
	e.t.Helper()
	cl := e.client()
	defer cl.Close()
	for _, v := range values {
		s, _ := parseValue([]byte(v))
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(s), Value: []byte(v)}).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestStall: a handler blocks past StallTimeout. By default the partition is
// reported stalled and holds; with SkipStalled the record goes to the DLQ
// with reason "stalled", the partition moves on, and the session's next
// message still waits for the stuck handler.
func TestStall(t *testing.T) {
	for _, skip := range []bool{false, true} {
		name := "report only"
		if skip {
			name = "skip stalled"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "dlq")
			e.produceValues("chats", "a|0", "b|0", "b|1", "b|2", "b|3", "b|4", "a|1") // offsets 0..6
			release := make(chan struct{})
			rec := newRecorder(7, func(ctx context.Context, m *Message) error {
				if string(m.Record.Value) == "a|0" {
					<-release // ignores its context, on purpose
				}
				return nil
			})
			cfg := e.config("g-stall", "chats")
			cfg.StallTimeout = 200 * time.Millisecond
			cfg.SkipStalled = skip
			c, err := New(cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			eventually(t, "stall report", func() bool {
				ps := c.Stats().Partitions
				return c.Stats().Stalls == 1 && len(ps) == 1 && ps[0].Stalled
			})
			if skip {
				eventually(t, "skip to the DLQ", func() bool { return c.Stats().DeadLetteredByReason[ReasonStalled] == 1 })
				eventually(t, "watermark past the stalled record", func() bool { return c.Stats().Partitions[0].Watermark == 6 })
				r := readDLQ(t, e, 1)[0]
				if Reason(header(r, HeaderDLQReason)) != ReasonStalled || string(r.Value) != "a|0" {
					t.Errorf("DLQ record %q reason %q", r.Value, Reason(header(r, HeaderDLQReason)))
				}
			} else if wm := c.Stats().Partitions[0].Watermark; wm != 0 {
				t.Errorf("report-only: watermark moved to %d", wm)
			}
			for _, call := range rec.snapshot() {
				if call.session == "a" && call.seq == 1 {
					t.Fatal("a|1 ran while a|0 was stuck")
				}
			}
			close(release)
			rec.wait(t)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			checkOrder(t, rec, []string{"chats"}, []string{"b"}, 5)
			checkOrder(t, rec, []string{"chats"}, []string{"a"}, 2)
		})
	}
}

// TestHandlerIgnoringContextReported: a handler that ignores its context
// past HandlerTimeout is reported (Stats.SlowHandlers), and its session's
// next message waits until it returns.
func TestHandlerIgnoringContextReported(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0", "a|1")
	release := make(chan struct{})
	rec := newRecorder(2, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "a|0" {
			<-release // ignores ctx on purpose
		}
		return nil
	})
	cfg := e.config("g-slow", "chats")
	cfg.HandlerTimeout = 50 * time.Millisecond
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "slow handler report", func() bool { return c.Stats().SlowHandlers == 1 })
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("%d calls finished while a|0 was stuck", n)
	}
	close(release)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, []string{"a"}, 2)
}
