package consumer

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/clip"
)

// createTopic creates topic with one partition and the given
// max.message.bytes ("" for the broker default).
func (e *env) createTopic(topic, maxMessageBytes string) {
	e.t.Helper()
	var cfg map[string]*string
	if maxMessageBytes != "" {
		cfg = map[string]*string{"max.message.bytes": &maxMessageBytes}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
		e.t.Fatalf("create %s: %v", topic, err)
	}
}

// produceSized writes one record of session s with a value of n bytes that
// do not compress (brokers measure max.message.bytes after compression).
func (e *env) produceSized(topic, s string, n int) {
	e.t.Helper()
	v := make([]byte, n)
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	copy(v, s+"|")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.client().ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(s), Value: v}).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// TestDLQCopyFitsTopicLimit: a record just under the limit its topic shares
// with the DLQ topic is still dead-lettered: the lanes-dlq-* headers are
// bounded, the error text is cut to what fits.
func TestDLQCopyFitsTopicLimit(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.createTopic("dlq", "20000")
	e.produceSized("chats", "big", 19500)
	long := errors.New(strings.Repeat("the error text is long; ", 100))
	rec := newRecorder(1, func(context.Context, *Message) error { return Permanent(long) })
	runAll(t, e.config("g-dlq-fit", "chats"), rec, 1)
	got := readDLQ(t, e, 1)[0]
	if len(got.Value) != 19500 || Reason(header(got, HeaderDLQReason)) != ReasonPermanent {
		t.Fatalf("DLQ copy: %d bytes, reason %q", len(got.Value), Reason(header(got, HeaderDLQReason)))
	}
	if n := len(header(got, HeaderDLQError)); n >= clip.MaxError {
		t.Fatalf("error header %d bytes: not cut to fit the topic limit", n)
	}
}

// TestDLQCopyTooLargeHoldsPartition: a record whose copy can never fit the
// DLQ topic holds its partition with a clear, non-retriable error in
// Stats, and the documented way out (a Filter dropping that offset) lets
// the partition move on.
func TestDLQCopyTooLargeHoldsPartition(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.createTopic("dlq", "5000")
	e.produceSized("chats", "big", 8000) // offset 0
	e.produceValues("chats", "b|0")      // offset 1
	rec := newRecorder(2, func(_ context.Context, m *Message) error {
		if m.SessionID == "big" {
			return Permanent(errors.New("cannot parse"))
		}
		return nil
	})
	cfg := e.config("g-dlq-large", "chats")
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "the DLQ write reported blocked", func() bool { return c.Stats().DeadLetterBlocked == 1 })
	ps := c.Stats().Partitions[0]
	if ps.DeadLetterBlockedAt != 0 || !strings.Contains(ps.DeadLetterError, "MESSAGE_TOO_LARGE") || ps.Watermark != 0 {
		t.Fatalf("partition stats %+v: want blocked at 0 with MESSAGE_TOO_LARGE, watermark 0", ps)
	}
	if err := stop(); !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("Run: %v; want ErrUnfinished naming the write that cannot succeed", err)
	}

	cfg.Filter = func(r *kgo.Record) bool { return !(r.Topic == "chats" && r.Partition == 0 && r.Offset == 0) }
	// Offset 1 is not run again: the commit metadata lists it completed.
	c, err = New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop = start(t, c)
	eventually(t, "the commit past the filtered record", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Committed == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Filtered != 1 || s.SkippedDone != 1 {
		t.Fatalf("filtered %d, skipped as done %d; want 1, 1", s.Filtered, s.SkippedDone)
	}
	offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), "g-dlq-large")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("chats", 0); o.At != 2 {
		t.Fatalf("committed %d after the way out, want 2", o.At)
	}
}

// TestDLQTopicCreatedLater: a DLQ topic created after the consumer started
// is written to within seconds; until then the record holds its partition.
func TestDLQTopicCreatedLater(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.produceValues("chats", "a|0")
	rec := newRecorder(1, func(context.Context, *Message) error { return Permanent(errors.New("poison")) })
	cfg := e.config("g-dlq-late", "chats")
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "a failed DLQ write", func() bool { return c.Stats().DeadLetterFailures > 0 })
	e.createTopic("dlq", "")
	eventually(t, "the DLQ write after the topic exists", func() bool { return c.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := readDLQ(t, e, 1); string(got[0].Value) != "a|0" {
		t.Fatalf("DLQ holds %q", got[0].Value)
	}
}

// TestShutdownBoundedDuringRebalance: Run returns within ShutdownTimeout +
// CommitTimeout + LeaveTimeout (and a little) even when the member is in a
// JoinGroup that does not complete (another member holds the rebalance).
func TestShutdownBoundedDuringRebalance(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	cfg := e.config("g-leave", "chats")
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = time.Second, time.Second, time.Second
	a, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	stopA, waitA := runMember(t, a, "A")
	eventually(t, "A assigned", func() bool { return len(a.Stats().Partitions) == 2 })
	aID := memberID(t, e, cfg.Group)

	unblock := make(chan struct{})
	held := make(chan struct{})
	t.Cleanup(func() { close(unblock) }) // runs before the cluster closes
	first := true
	e.c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if req.(*kmsg.JoinGroupRequest).MemberID != aID {
			return nil, nil, false
		}
		if first {
			first = false
			close(held)
		}
		e.sleep(unblock)
		return nil, nil, false
	})
	b, err := New(cfg, newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	runMember(t, b, "B") // its join makes A rejoin, and A's join is held
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("A never rejoined")
	}
	began := time.Now()
	stopA()
	waitA()
	bound := cfg.ShutdownTimeout + cfg.CommitTimeout + cfg.LeaveTimeout + 5*time.Second
	if took := time.Since(began); took > bound {
		t.Fatalf("Run returned %v after cancel, bound %v", took, bound)
	}
}

// TestShutdownBoundedWithUnansweredDLQ: the broker takes the DLQ write and
// never answers (it died mid-request). The idempotent producer never gives
// up on a sent request, so the write must end with its context: the lane,
// and Run, are not held past the shutdown bound.
func TestShutdownBoundedWithUnansweredDLQ(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0")
	sent := neverAnswerProduce(e)
	rec := newRecorder(1, func(context.Context, *Message) error { return Permanent(errors.New("poison")) })
	cfg := e.config("g-dlq-silent", "chats")
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = 500*time.Millisecond, time.Second, time.Second
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	select {
	case <-sent:
	case <-time.After(testTimeout):
		t.Fatal("no DLQ write reached the broker")
	}
	began := time.Now()
	stop()
	err = wait()
	bound := cfg.ShutdownTimeout + cfg.CommitTimeout + cfg.LeaveTimeout + 5*time.Second
	if took := time.Since(began); took > bound {
		t.Fatalf("Run returned %v after cancel, bound %v", took, bound)
	}
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "ended by the shutdown before the broker answered") ||
		strings.Contains(err.Error(), "failing") {
		t.Fatalf("Run: %v, want ErrUnfinished naming the DLQ write the shutdown ended (not failing: it was cut)", err)
	}
	if n := c.Stats().DeadLetterFailures; n != 0 {
		t.Fatalf("Stats.DeadLetterFailures %d; want 0: the write was cut, not failing", n)
	}
}

// TestShutdownCutsStallSkipWrite: SkipStalled's dead-letter write of a
// stalled record is in flight (the broker never answers) when the
// shutdown begins: the write is ended, not failing. Run's ErrUnfinished
// names it as ended by the shutdown and no failed write is counted.
func TestShutdownCutsStallSkipWrite(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0")
	sent := neverAnswerProduce(e)
	rec := newRecorder(1, func(ctx context.Context, _ *Message) error {
		<-ctx.Done() // stalls the partition until the shutdown cancels it
		return ctx.Err()
	})
	cfg := e.config("g-stall-cut", "chats")
	cfg.SkipStalled, cfg.StallTimeout = true, 200*time.Millisecond
	cfg.ShutdownTimeout, cfg.CommitTimeout, cfg.LeaveTimeout = 500*time.Millisecond, 5*time.Second, time.Second
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	select {
	case <-sent:
	case <-time.After(testTimeout):
		t.Fatal("no stall-skip DLQ write reached the broker")
	}
	stop()
	err = wait()
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "ended by the shutdown before the broker answered") ||
		strings.Contains(err.Error(), "failing") {
		t.Fatalf("Run: %v, want ErrUnfinished naming the stall-skip DLQ write the shutdown ended (not failing)", err)
	}
	if n := c.Stats().DeadLetterFailures; n != 0 {
		t.Fatalf("Stats.DeadLetterFailures %d; want 0: the write was ended, not failing", n)
	}
}

// neverAnswerProduce makes the broker take every produce request and never
// answer it (it died mid-request); the channel is closed at the first.
func neverAnswerProduce(e *env) <-chan struct{} {
	sent := make(chan struct{})
	first := true
	e.c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if first {
			first = false
			close(sent)
		}
		return nil, nil, true // never answer
	})
	return sent
}

// TestDLQBlockedAfterRetriable: a record whose dead-letter write first
// fails with a retriable error (the topic missing) and then with one that
// is not (the topic, made since, takes less than the copy) is counted in
// Stats.DeadLetterBlocked once. Before the fix only a first failure that
// was not retriable counted, so the record held its partition for good
// while DeadLetterBlocked said 0 and its error line was never logged.
func TestDLQBlockedAfterRetriable(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.produceSized("chats", "big", 8000)
	rec := newRecorder(1, func(context.Context, *Message) error { return Permanent(errors.New("poison")) })
	cfg := e.config("g-dlq-blocked-late", "chats")
	cfg.CommitTimeout = 300 * time.Millisecond
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "a failed dead-letter write (the topic missing)", func() bool { return c.Stats().DeadLetterFailures > 0 })
	if s := c.Stats(); s.DeadLetterBlocked != 0 {
		t.Fatalf("DeadLetterBlocked %d while the write fails for a missing topic (retriable); want 0", s.DeadLetterBlocked)
	}
	e.createTopic("dlq", "5000")
	var failures int64
	eventually(t, "MESSAGE_TOO_LARGE in the partition's stats", func() bool {
		s := c.Stats()
		failures = s.DeadLetterFailures
		return len(s.Partitions) == 1 && strings.Contains(s.Partitions[0].DeadLetterError, "MESSAGE_TOO_LARGE")
	})
	// The lane writes again after reporting that failure: once it failed
	// again, the report of the first MESSAGE_TOO_LARGE is in Stats.
	eventually(t, "a further failed write", func() bool { return c.Stats().DeadLetterFailures > failures })
	if s := c.Stats(); s.DeadLetterBlocked != 1 || s.Partitions[0].Watermark != 0 {
		t.Fatalf("DeadLetterBlocked %d, watermark %d; want the record counted blocked once, holding its partition at 0",
			s.DeadLetterBlocked, s.Partitions[0].Watermark)
	}
	if err := stop(); !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("Run: %v; want ErrUnfinished naming the write that cannot succeed", err)
	}
}
