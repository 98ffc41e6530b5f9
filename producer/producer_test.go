package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// A producer given no logger logs to slog.Default(): keep the tests
	// quiet.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

const testTimeout = 60 * time.Second

func cluster(t *testing.T, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newProducer(t *testing.T, cfg Config) *Producer {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// readAll reads n records of topic from the start.
func readAll(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestSendStampsAndPartitions(t *testing.T) {
	c := cluster(t, 6, "chat")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat"})
	ctx := context.Background()
	res, err := p.Send(ctx, "chat-42", []byte("book a flight to London"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hashring.KafkaPartition([]byte("chat-42"), 6)
	if int(res.Partition) != want {
		t.Errorf("partition %d, want Kafka's %d", res.Partition, want)
	}
	if u, err := uuid.Parse(res.EventID); err != nil || u.Version() != 7 {
		t.Errorf("event ID %q is not a UUIDv7: %v", res.EventID, err)
	}
	seqRes, err := p.Send(ctx, "chat-42", []byte("make it Paris"), WithSequence(2), WithHeader("lang", []byte("en")))
	if err != nil {
		t.Fatal(err)
	}
	if seqRes.EventID != eventid.ForSequence("chat-42", 2) {
		t.Errorf("WithSequence ID %s", seqRes.EventID)
	}
	recs := readAll(t, c, "chat", 2)
	for i, r := range recs {
		if string(r.Key) != "chat-42" || eventid.SessionFromRecord(r) != "chat-42" {
			t.Errorf("record %d key %q session header %q", i, r.Key, eventid.SessionFromRecord(r))
		}
	}
	if eventid.FromRecord(recs[0]) != res.EventID || eventid.FromRecord(recs[1]) != seqRes.EventID {
		t.Error("event IDs on the wire differ from the results")
	}
	if v, _ := eventid.Header(recs[1], "lang"); v != "en" {
		t.Error("custom header lost")
	}
	if recs[0].Offset != res.Offset || recs[1].Offset != seqRes.Offset {
		t.Error("offsets differ from the results")
	}
}

func TestJumpPartitioning(t *testing.T) {
	c := cluster(t, 7, "chat")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat", Partitioning: PartitionJump})
	for i := 0; i < 50; i++ {
		s := fmt.Sprintf("s-%d", i)
		res, err := p.Send(context.Background(), s, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := hashring.JumpPartition(s, 7); int(res.Partition) != want {
			t.Fatalf("%s on partition %d, want %d", s, res.Partition, want)
		}
	}
}

// TestAsyncOrderUnderBrokerErrors: 20 goroutines each send 200 messages of
// their own sessions with SendAsync while the broker fails every 10th
// produce request with a retriable error (NOT_ENOUGH_REPLICAS) and drops the connection on every
// 23rd. Every session's messages land in send order, each exactly once, with
// the event ID its callback reported.
func TestAsyncOrderUnderBrokerErrors(t *testing.T) {
	c := cluster(t, 3, "chat")
	var n atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch k := n.Add(1); {
		case k%23 == 0:
			return nil, errors.New("injected: connection dropped"), true
		case k%10 == 0:
			return failProduce(kreq.(*kmsg.ProduceRequest)), nil, true
		}
		return nil, nil, false
	})
	// Small batches: many produce requests, so many injected faults. A
	// partition error makes franz-go refresh metadata before retrying, at
	// most once per MetadataMinAge (5s by default): lowered so the test
	// takes a second, not half a minute.
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat",
		ClientOptions: []kgo.Opt{kgo.ProducerBatchMaxBytes(4096),
			kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }),
			kgo.MetadataMinAge(10 * time.Millisecond)}})
	const senders, per = 20, 200
	var (
		mu  sync.Mutex
		ids = map[string]string{} // event ID → "session|seq"
		wg  sync.WaitGroup
	)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < per; seq++ {
				s := fmt.Sprintf("sess-%d-%d", g, seq%3) // three sessions per goroutine
				v := fmt.Sprintf("%s|%d", s, seq)
				p.SendAsync(context.Background(), s, []byte(v), func(r Result, err error) {
					if err != nil {
						t.Errorf("send %s: %v", v, err)
						return
					}
					mu.Lock()
					ids[r.EventID] = v
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() < 8 {
		t.Fatalf("only %d produce requests: faults were not exercised", n.Load())
	}
	recs := readAll(t, c, "chat", senders*per)
	last := map[string]int{}
	for _, r := range recs {
		var seq int
		sess, seqStr, _ := cutLast(string(r.Value))
		if _, err := fmt.Sscan(seqStr, &seq); err != nil {
			t.Fatalf("value %q: %v", r.Value, err)
		}
		if prev, ok := last[sess]; ok && seq <= prev {
			t.Fatalf("session %s: seq %d after %d", sess, seq, prev)
		}
		last[sess] = seq
		if ids[eventid.FromRecord(r)] != string(r.Value) {
			t.Fatalf("record %s carries event ID %s, callback said %q", r.Value, eventid.FromRecord(r), ids[eventid.FromRecord(r)])
		}
	}
	if len(recs) != senders*per || len(ids) != senders*per {
		t.Fatalf("%d records, %d IDs; want %d each (no loss, no duplicates)", len(recs), len(ids), senders*per)
	}
}

func cutLast(v string) (string, string, bool) {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == '|' {
			return v[:i], v[i+1:], true
		}
	}
	return v, "", false
}

func failProduce(req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			pr := kmsg.NewProduceResponseTopicPartition()
			pr.Partition = rp.Partition
			pr.ErrorCode = kerr.NotEnoughReplicas.Code
			t.Partitions = append(t.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func TestBadInput(t *testing.T) {
	c := cluster(t, 1, "chat")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat", MaxMessageBytes: 1000,
		DeliveryTimeout: 5 * time.Second})
	ctx := context.Background()
	cases := []struct {
		name    string
		session string
		value   []byte
		opts    []SendOption
		want    error
	}{
		{"empty session", "", []byte("x"), nil, ErrEmptySession},
		{"nil value", "s", nil, nil, ErrNilValue},
		{"too large", "s", make([]byte, 2000), nil, ErrTooLarge},
		{"bad event ID", "s", []byte("x"), []SendOption{WithEventID("nope")}, ErrBadEventID},
		{"empty event ID", "s", []byte("x"), []SendOption{WithEventID("")}, ErrBadEventID}, // a missing idempotency key: no random ID
	}
	for _, tc := range cases {
		if _, err := p.Send(ctx, tc.session, tc.value, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := p.Send(ctx, "s", []byte{}); err != nil {
		t.Errorf("empty non-nil value: %v", err)
	}

	missing := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "no-such-topic", DeliveryTimeout: 5 * time.Second})
	if _, err := missing.Send(ctx, "s", []byte("x")); !errors.Is(err, ErrUnknownTopic) && !errors.Is(err, ErrTimeout) {
		t.Errorf("unknown topic: %v, want ErrUnknownTopic", err)
	}

	p.Close()
	if _, err := p.Send(ctx, "s", []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	p.Close() // idempotent
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]Config{
		"Brokers":         {Topic: "t"},
		"Linger":          {Brokers: []string{"b:1"}, Linger: -time.Millisecond},
		"Slog":            {Brokers: []string{"b:1"}, Slog: slog.Default(), Logger: &nopLog},
		"Partitioning":    {Brokers: []string{"b:1"}, Topic: "t", Partitioning: 9},
		"DeliveryTimeout": {Brokers: []string{"b:1"}, Topic: "t", DeliveryTimeout: -1},
		"MaxMessageBytes": {Brokers: []string{"b:1"}, Topic: "t", MaxMessageBytes: -1},
	}
	for field, cfg := range cases {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// TestWithTopic: one producer serves several topics; a session lands on the
// same partition of each (same partition count), in send order per topic; a
// send with no topic at all fails with ErrNoTopic.
func TestWithTopic(t *testing.T) {
	c := cluster(t, 6, "chat", "audit")
	ctx := context.Background()
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat"})
	for i := range 3 {
		a, err := p.Send(ctx, "chat-7", []byte(fmt.Sprint("audit ", i)), WithTopic("audit"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := p.Send(ctx, "chat-7", []byte(fmt.Sprint("chat ", i)))
		if err != nil {
			t.Fatal(err)
		}
		if a.Partition != d.Partition {
			t.Fatalf("session on partition %d of audit, %d of chat", a.Partition, d.Partition)
		}
	}
	for topic, want := range map[string]string{"audit": "audit ", "chat": "chat "} {
		for i, r := range readAll(t, c, topic, 3) {
			if r.Topic != topic || string(r.Value) != fmt.Sprint(want, i) {
				t.Errorf("%s record %d: %s %q", topic, i, r.Topic, r.Value)
			}
		}
	}
	none := newProducer(t, Config{Brokers: c.ListenAddrs()})
	if _, err := none.Send(ctx, "s", []byte("x")); !errors.Is(err, ErrNoTopic) {
		t.Errorf("no topic: %v, want ErrNoTopic", err)
	}
	if _, err := none.Send(ctx, "s", []byte("x"), WithTopic("audit")); err != nil {
		t.Errorf("no default topic, WithTopic: %v", err)
	}
}

var nopLog = zerolog.Nop()

// TestSlog: a failed delivery is logged through Config.Slog, at Warn,
// naming the topic and the session.
func TestSlog(t *testing.T) {
	c := cluster(t, 1, "chat")
	var buf syncBuffer
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), DeliveryTimeout: time.Second,
		Slog: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if _, err := p.Send(context.Background(), "s-1", []byte("x"), WithTopic("no-such-topic")); err == nil {
		t.Fatal("send to a missing topic succeeded")
	}
	if got := buf.String(); !strings.Contains(got, `"level":"WARN","msg":"send failed: `) ||
		!strings.Contains(got, `"topic":"no-such-topic"`) || !strings.Contains(got, `"session":"s-1"`) {
		t.Fatalf("slog output %q: want the failed send with its topic and session", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLinger: a synchronous Send does not wait for franz-go's 10ms linger
// unless asked to; a client option still wins.
func TestLinger(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{"default", Config{}, DefaultLinger},
		{"set", Config{Linger: 5 * time.Millisecond}, 5 * time.Millisecond},
		{"client option", Config{Linger: 5 * time.Millisecond, ClientOptions: []kgo.Opt{kgo.ProducerLinger(time.Second)}}, time.Second},
	} {
		tc.cfg.Brokers = []string{"127.0.0.1:1"}
		p := newProducer(t, tc.cfg)
		if got := p.cl.OptValue(kgo.ProducerLinger); got != tc.want {
			t.Errorf("%s: client linger %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCloseCallsEveryCallbackOnce: sends in flight when Close runs are each
// delivered or failed exactly once.
func TestCloseCallsEveryCallbackOnce(t *testing.T) {
	c := cluster(t, 2, "chat")
	p, err := New(Config{Brokers: c.ListenAddrs(), Topic: "chat", CloseTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	calls := make([]atomic.Int32, n)
	var delivered, failed atomic.Int64
	for i := 0; i < n; i++ {
		p.SendAsync(context.Background(), fmt.Sprintf("s%d", i%10), []byte("v"), func(_ Result, err error) {
			calls[i].Add(1)
			if err != nil {
				failed.Add(1)
			} else {
				delivered.Add(1)
			}
		})
	}
	p.Close()
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("callback %d ran %d times", i, got)
		}
	}
	t.Logf("Close with %d in flight: %d delivered, %d failed", n, delivered.Load(), failed.Load())
}

func TestRouterMovement(t *testing.T) {
	r, err := NewRouter("gw-1", "gw-2", "gw-3", "gw-4", "gw-5")
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 20000
	before := make([]string, sessions)
	for i := range before {
		before[i], _ = r.Owner(fmt.Sprintf("chat-%d", i))
	}
	if err := r.Add("gw-6"); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range before {
		now, _ := r.Owner(fmt.Sprintf("chat-%d", i))
		if now != before[i] {
			moved++
			if now != "gw-6" {
				t.Fatalf("session moved between unchanged instances: %s → %s", before[i], now)
			}
		}
	}
	if f := float64(moved) / sessions; f < 0.6/6 || f > 1.4/6 {
		t.Fatalf("moved %.3f of sessions, want about 1/6", f)
	}
	if err := r.Remove("gw-6"); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("gw-1"); !errors.Is(err, hashring.ErrDuplicateMember) {
		t.Fatalf("duplicate: %v", err)
	}
	if len(r.Instances()) != 5 {
		t.Fatalf("instances %v", r.Instances())
	}
}
