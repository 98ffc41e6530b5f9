package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchRecorder is a BatchHandler over a recorder: every call is checked
// (one session, consecutive seqs, at most max messages, no two calls of a
// session overlapping) and recorded per message, the way checkOrder reads
// it: the messages done, then the one that failed (if any); the messages
// behind it were not attempted. outcome decides each call's result.
type batchRecorder struct {
	*recorder
	max     int
	outcome func(ms []*Message) error // nil: all done

	bmu     sync.Mutex
	batches [][]string // each call's values, "session|seq"
}

func newBatchRecorder(want, max int, outcome func([]*Message) error) *batchRecorder {
	return &batchRecorder{recorder: newRecorder(want, nil), max: max, outcome: outcome}
}

func (r *batchRecorder) HandleBatch(ctx context.Context, ms []*Message) error {
	session, first := parseValue(ms[0].Record.Value)
	vals := make([]string, len(ms))
	r.mu.Lock()
	if r.running[session] {
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s batch at seq %d started while another call of the session ran", session, first))
	}
	r.running[session] = true
	if len(ms) > r.max {
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s: batch of %d, MaxBatch %d", session, len(ms), r.max))
	}
	for i, m := range ms {
		vals[i] = string(m.Record.Value)
		s, seq := parseValue(m.Record.Value)
		if s != session || seq != first+i || m.Record.Topic != ms[0].Record.Topic {
			r.overlaps = append(r.overlaps, fmt.Sprintf("batch %v is not consecutive messages of one session", vals))
		}
	}
	r.mu.Unlock()
	r.bmu.Lock()
	r.batches = append(r.batches, vals)
	r.bmu.Unlock()

	var err error
	if r.outcome != nil {
		err = r.outcome(ms)
	}
	done, cause := batchOutcome(err, len(ms))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[session] = false
	for i, m := range ms[:min(done+1, len(ms))] {
		var e error
		if i == done {
			e = cause
		}
		_, seq := parseValue(m.Record.Value)
		r.calls = append(r.calls, call{session, seq, m.Attempt, m.Record.Topic, m.Record.Partition, m.Record.Offset, e})
		k := m.Record.Topic + "|" + string(m.Record.Value)
		if (e == nil || IsPermanent(e) || (r.isLast != nil && r.isLast(m, e))) && !r.finished[k] {
			r.finished[k] = true
			if len(r.finished) == r.want {
				close(r.full)
			}
		}
	}
	return err
}

func (r *batchRecorder) seen() [][]string {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	return append([][]string(nil), r.batches...)
}

func runAllBatch(t *testing.T, cfg Config, rec *batchRecorder, wantDLQ int64) *Consumer {
	t.Helper()
	c, err := NewBatch(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	return runUntil(t, c, rec.wait, wantDLQ)
}

// TestBatchOrderWithFailures: 200 sessions over 4 partitions, batches of at
// most 8, random whole-batch failures, random partial successes and a few
// permanent errors. Every batch is consecutive messages of one session, no
// two calls of a session overlap, every message's calls run in order and
// all of them finish; exactly the permanent ones are dead-lettered.
func TestBatchOrderWithFailures(t *testing.T) {
	e := newEnv(t, 4, "chats", "dlq")
	sessions := sessionNames(200)
	const per, max = 30, 8
	e.produce("chats", sessions, per)
	permanent := map[string]bool{"chat-0003|7": true, "chat-0010|0": true, "chat-0199|29": true, "chat-0042|15": true}
	rec := newBatchRecorder(len(sessions)*per, max, func(ms []*Message) error {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		for i, m := range ms {
			if permanent[string(m.Record.Value)] {
				return &BatchError{Done: i, Err: Permanent(errors.New("cannot parse request"))}
			}
		}
		switch rand.IntN(10) {
		case 0:
			return errors.New("database busy")
		case 1:
			return &BatchError{Done: rand.IntN(len(ms)), Err: errors.New("row conflict")}
		}
		return nil
	})
	cfg := e.config("g-batch-order", "chats")
	cfg.MaxBatch = max
	cfg.Retry.MaxAttempts = 50
	c := runAllBatch(t, cfg, rec, int64(len(permanent)))
	checkOrder(t, rec.recorder, []string{"chats"}, sessions, per)
	st := c.Stats()
	if st.Retries == 0 {
		t.Error("no retries with 20% failures")
	}
	if want := int64(len(sessions)*per - len(permanent)); st.Processed != want {
		t.Errorf("Stats.Processed = %d, want %d", st.Processed, want)
	}
	multi := 0
	for _, b := range rec.seen() {
		if len(b) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Error("no call had more than one message")
	}
	for _, r := range readDLQ(t, e, len(permanent)) {
		if !permanent[string(r.Value)] || Reason(header(r, HeaderDLQReason)) != ReasonPermanent {
			t.Errorf("unexpected DLQ record %q (reason %q)", r.Value, Reason(header(r, HeaderDLQReason)))
		}
	}
}

// produceSeqs writes session's messages from..to-1 to topic.
func produceSeqs(t *testing.T, e *env, topic, session string, from, to int) {
	t.Helper()
	cl := e.client()
	defer cl.Close()
	var recs []*kgo.Record
	for seq := from; seq < to; seq++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(session), Value: []byte(session + "|" + strconv.Itoa(seq))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// queued reports how many records wait in session's lane.
func queued(c *Consumer, session string) int {
	for _, s := range c.shards {
		s.mu.Lock()
		l := s.lanes[session]
		n := 0
		if l != nil {
			n = len(l.queue)
		}
		s.mu.Unlock()
		if n > 0 {
			return n
		}
	}
	return 0
}

// gatedBatches runs a batch consumer over session "a": message a|0 is
// produced alone and its call (a batch of one: nothing else waits) blocks
// until a|1..a|n are produced and queued behind it, so the next call sees
// them together. outcome decides the calls after the first. It returns
// every call's values and the consumer, stopped, once want messages
// finished.
func gatedBatches(t *testing.T, group string, n, max int, cfg func(*Config), outcome func(call int, ms []*Message) error) ([][]string, *Consumer, *env) {
	t.Helper()
	e := newEnv(t, 1, "chats", "dlq")
	gate := make(chan struct{})
	var calls int
	rec := newBatchRecorder(n+1, max, func(ms []*Message) error {
		calls++ // calls of one session never overlap
		if calls == 1 {
			<-gate
			return nil
		}
		return outcome(calls, ms)
	})
	config := e.config(group, "chats")
	config.MaxBatch = max
	if cfg != nil {
		cfg(&config)
	}
	if n := config.Retry.MaxAttempts; n > 0 {
		rec.isLast = func(m *Message, err error) bool { return m.Attempt == n }
	}
	c, err := NewBatch(config, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	produceSeqs(t, e, "chats", "a", 0, 1)
	eventually(t, "the first call", func() bool { return len(rec.seen()) == 1 })
	produceSeqs(t, e, "chats", "a", 1, n+1)
	eventually(t, "the rest queued", func() bool { return queued(c, "a") == n })
	close(gate)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOrder(t, rec.recorder, []string{"chats"}, []string{"a"}, n+1)
	return rec.seen(), c, e
}

func vals(seqs ...int) string {
	out := make([]string, len(seqs))
	for i, s := range seqs {
		out[i] = "a|" + strconv.Itoa(s)
	}
	return strings.Join(out, " ")
}

func checkCalls(t *testing.T, got [][]string, want ...string) {
	t.Helper()
	var g []string
	for _, b := range got {
		g = append(g, strings.Join(b, " "))
	}
	if strings.Join(g, " / ") != strings.Join(want, " / ") {
		t.Errorf("calls:\n got %q\nwant %q", g, want)
	}
}

// TestBatchTakesWhatWaits: a lone message is a batch of one (nothing waits
// to fill a batch); the nine queued behind a running call come in batches
// of at most MaxBatch (4), in order.
func TestBatchTakesWhatWaits(t *testing.T) {
	got, _, _ := gatedBatches(t, "g-batch-waits", 9, 4, nil, func(int, []*Message) error { return nil })
	checkCalls(t, got, vals(0), vals(1, 2, 3, 4), vals(5, 6, 7, 8), vals(9))
}

// TestBatchPartialSuccess: a BatchError with Done 2 finishes exactly the
// first two messages; the next call starts at the third, its second
// attempt, and reruns the rest of the batch.
func TestBatchPartialSuccess(t *testing.T) {
	var attempts []int
	got, c, _ := gatedBatches(t, "g-batch-partial", 6, 8, nil, func(call int, ms []*Message) error {
		attempts = append(attempts, ms[0].Attempt, ms[1].Attempt)
		if call == 2 {
			return &BatchError{Done: 2, Err: errors.New("row conflict")}
		}
		return nil
	})
	checkCalls(t, got, vals(0), vals(1, 2, 3, 4, 5, 6), vals(3, 4, 5, 6))
	if fmt.Sprint(attempts) != "[1 1 2 1]" {
		t.Errorf("head and second attempts per call %v, want [1 1 2 1]", attempts)
	}
	if st := c.Stats(); st.Retries != 1 || st.Processed != 7 {
		t.Errorf("Retries %d, Processed %d; want 1, 7", st.Retries, st.Processed)
	}
}

// TestBatchWholeRetry: any other error leaves the whole batch undone: the
// same messages come again, the head on its second attempt.
func TestBatchWholeRetry(t *testing.T) {
	var heads []int
	got, _, _ := gatedBatches(t, "g-batch-whole", 3, 8, nil, func(call int, ms []*Message) error {
		heads = append(heads, ms[0].Attempt)
		if call == 2 {
			return errors.New("database busy")
		}
		return nil
	})
	checkCalls(t, got, vals(0), vals(1, 2, 3), vals(1, 2, 3))
	if fmt.Sprint(heads) != "[1 2]" {
		t.Errorf("head attempts %v, want [1 2]", heads)
	}
}

// TestBatchPermanentDeadLettersHead: a Permanent error in a BatchError
// dead-letters exactly the first message not done, and a bare Permanent
// error the batch's head; the rest continue in the next call.
func TestBatchPermanentDeadLettersHead(t *testing.T) {
	got, c, e := gatedBatches(t, "g-batch-perm", 5, 8, nil, func(call int, ms []*Message) error {
		switch call {
		case 2:
			return &BatchError{Done: 1, Err: Permanent(errors.New("bad row"))}
		case 3:
			return Permanent(errors.New("bad request"))
		}
		return nil
	})
	checkCalls(t, got, vals(0), vals(1, 2, 3, 4, 5), vals(3, 4, 5), vals(4, 5))
	dlq := readDLQ(t, e, 2)
	if len(dlq) != 2 || string(dlq[0].Value) != "a|2" || string(dlq[1].Value) != "a|3" {
		t.Fatalf("DLQ holds %d records, want a|2 then a|3", len(dlq))
	}
	for _, r := range dlq {
		if Reason(header(r, HeaderDLQReason)) != ReasonPermanent || header(r, HeaderDLQAttempts) != "1" {
			t.Errorf("DLQ %q headers %v", r.Value, r.Headers)
		}
	}
	if st := c.Stats(); st.DeadLettered != 2 || st.Processed != 4 {
		t.Errorf("DeadLettered %d, Processed %d; want 2, 4", st.DeadLettered, st.Processed)
	}
}

// TestBatchRetriesExhausted: the retry budget counts the head's attempts;
// when it is spent the head alone is dead-lettered.
func TestBatchRetriesExhausted(t *testing.T) {
	got, _, e := gatedBatches(t, "g-batch-exhaust", 3, 8, func(cfg *Config) { cfg.Retry.MaxAttempts = 3 },
		func(call int, ms []*Message) error {
			if string(ms[0].Record.Value) == "a|2" {
				return errors.New("always down")
			}
			if len(ms) > 1 && string(ms[1].Record.Value) == "a|2" {
				return &BatchError{Done: 1, Err: errors.New("always down")}
			}
			return nil
		})
	checkCalls(t, got, vals(0), vals(1, 2, 3), vals(2, 3), vals(2, 3), vals(3))
	r := readDLQ(t, e, 1)[0]
	if string(r.Value) != "a|2" || Reason(header(r, HeaderDLQReason)) != ReasonRetriesExhausted || header(r, HeaderDLQAttempts) != "3" {
		t.Errorf("DLQ %q headers %v", r.Value, r.Headers)
	}
}

func TestNewBatchConfig(t *testing.T) {
	h := BatchHandlerFunc(func(context.Context, []*Message) error { return nil })
	base := Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"}
	cfg := base
	cfg.MaxBatch = -1
	if _, err := NewBatch(cfg, h); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "MaxBatch") {
		t.Errorf("MaxBatch -1: %v", err)
	}
	cfg = base
	cfg.Middleware = []Middleware{func(h Handler) Handler { return h }}
	if _, err := NewBatch(cfg, h); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Middleware") {
		t.Errorf("Middleware: %v", err)
	}
	if _, err := NewBatch(base, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil handler: %v", err)
	}
	c, err := NewBatch(base, h)
	if err != nil || c.lanes.maxBatch != DefaultMaxBatch {
		t.Errorf("default MaxBatch: %v", err)
	}
}
