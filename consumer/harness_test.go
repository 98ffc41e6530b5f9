package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/lanesdev/lanes/eventid"
)

func TestMain(m *testing.M) {
	if os.Getenv("LANES_TEST_LOG") == "" {
		// Consumers given no logger log to slog.Default(): keep the
		// suite quiet unless asked.
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	code := m.Run()
	if benchCluster != nil {
		benchCluster.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testTimeout bounds every wait in these tests; reaching it is a failure.
const testTimeout = 90 * time.Second

type env struct {
	t      *testing.T
	c      *kfake.Cluster
	addrs  []string
	asleep *asleep // nil: env.sleep panics (see wrapEnv)
}

func newEnv(t *testing.T, partitions int32, topics ...string) *env {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	return wrapEnv(t, c)
}

func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.addrs...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// produce writes perSession numbered messages for each session, interleaved
// across sessions, keyed by session, with value "session|seq".
func (e *env) produce(topic string, sessions []string, perSession int) {
	e.t.Helper()
	cl := e.client()
	defer cl.Close()
	var recs []*kgo.Record
	for seq := 0; seq < perSession; seq++ {
		for _, s := range sessions {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(s), Value: []byte(s + "|" + strconv.Itoa(seq))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// testLogger writes lanes' log to stderr when LANES_TEST_LOG is set (to a
// zerolog level: debug, info, warn).
func testLogger() *zerolog.Logger {
	lvl, err := zerolog.ParseLevel(os.Getenv("LANES_TEST_LOG"))
	if err != nil || os.Getenv("LANES_TEST_LOG") == "" {
		return nil
	}
	l := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(lvl).With().Timestamp().Logger()
	return &l
}

func (e *env) config(group string, topics ...string) Config {
	return Config{
		Logger:  testLogger(),
		Brokers: e.addrs, Group: group, Topics: topics, DeadLetterTopic: "dlq",
		CommitInterval: 50 * time.Millisecond,
		Retry:          RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond},
	}
}

func sessionNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chat-%04d", i)
	}
	return out
}

func parseValue(v []byte) (string, int) {
	s, seq, _ := strings.Cut(string(v), "|")
	n, _ := strconv.Atoi(seq)
	return s, n
}

// call is one handler invocation as the recorder saw it.
type call struct {
	session   string
	seq       int
	attempt   int
	topic     string
	partition int32
	offset    int64
	err       error
}

// recorder is a Handler that records every call, checks that no two calls
// of one session overlap, and signals when `want` distinct messages are
// finished (succeeded, or failed permanently / for the last time).
type recorder struct {
	fail func(ctx context.Context, m *Message) error // nil: always succeed

	mu       sync.Mutex
	calls    []call
	running  map[string]bool
	overlaps []string
	finished map[string]bool // "topic|session|seq" done or given up
	want     int
	full     chan struct{}
	isLast   func(m *Message, err error) bool
}

func newRecorder(want int, fail func(context.Context, *Message) error) *recorder {
	return &recorder{fail: fail, running: map[string]bool{}, finished: map[string]bool{},
		want: want, full: make(chan struct{})}
}

func (r *recorder) Handle(ctx context.Context, m *Message) error {
	session, seq := parseValue(m.Record.Value)
	r.mu.Lock()
	if r.running[session] {
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s seq %d started while another message of the session ran", session, seq))
	}
	r.running[session] = true
	r.mu.Unlock()

	var err error
	defer func() {
		if p := recover(); p != nil {
			r.mu.Lock()
			r.running[session] = false
			r.calls = append(r.calls, call{session, seq, m.Attempt, m.Record.Topic, m.Record.Partition, m.Record.Offset, fmt.Errorf("panic: %v", p)})
			r.mu.Unlock()
			panic(p)
		}
	}()
	if r.fail != nil {
		err = r.fail(ctx, m)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[session] = false
	r.calls = append(r.calls, call{session, seq, m.Attempt, m.Record.Topic, m.Record.Partition, m.Record.Offset, err})
	last := err == nil || IsPermanent(err) || (r.isLast != nil && r.isLast(m, err))
	k := m.Record.Topic + "|" + session + "|" + strconv.Itoa(seq)
	if last && !r.finished[k] {
		r.finished[k] = true
		if len(r.finished) == r.want {
			close(r.full)
		}
	}
	return err
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.full:
	case <-time.After(testTimeout):
		r.mu.Lock()
		n := len(r.finished)
		r.mu.Unlock()
		t.Fatalf("timed out: %d of %d messages finished", n, r.want)
	}
}

// checkOrder verifies, for every session of every topic, that the calls
// ran in sequence: seq never goes backwards, a new seq starts only after the
// previous one succeeded or failed permanently, and every seq in
// [0, perSession) finished. dead lists the "session|seq" pairs expected to
// end in the DLQ.
func checkOrder(t *testing.T, r *recorder, topics []string, sessions []string, perSession int) {
	t.Helper()
	r.mu.Lock()
	overlaps := append([]string(nil), r.overlaps...)
	r.mu.Unlock()
	for _, o := range overlaps {
		t.Error("overlap:", o)
	}
	type key struct{ topic, session string }
	bySession := map[key][]call{}
	for _, c := range r.snapshot() {
		k := key{c.topic, c.session}
		bySession[k] = append(bySession[k], c)
	}
	violations := 0
	for _, topic := range topics {
		for _, s := range sessions {
			calls := bySession[key{topic, s}]
			next := 0 // next seq allowed to start
			for i, c := range calls {
				if c.seq != next {
					if violations++; violations < 10 {
						t.Errorf("%s/%s call %d: seq %d, want %d", topic, s, i, c.seq, next)
					}
					continue
				}
				if c.err == nil || IsPermanent(c.err) || (r.isLast != nil && (r.isLast(&Message{Attempt: c.attempt}, c.err) ||
					i+1 < len(calls) && calls[i+1].seq == c.seq+1)) {
					next++
				}
			}
			if next != perSession {
				if violations++; violations < 10 {
					t.Errorf("%s/%s: finished %d of %d messages", topic, s, next, perSession)
				}
			}
		}
	}
	if violations > 0 {
		t.Fatalf("%d order or completeness violations", violations)
	}
}

// unstarted is a consumer of topic "t" in group "g", dead letters to "d",
// that is never run, so no broker is dialled; edit, when set, changes its
// Config first. Its handler does nothing.
func unstarted(t *testing.T, edit func(*Config)) *Consumer {
	t.Helper()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs c until the returned stop is called; stop returns Run's error.
func start(t *testing.T, c *Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(testTimeout):
				t.Fatal("Run did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually polls cond (a state with no signal of its own, such as a
// broker-side commit) until it holds or the test timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, cond, nil)
}

// waitFor is eventually with a description of the state at a timeout.
func waitFor(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			if state != nil {
				t.Fatalf("timed out waiting for %s: %s", what, state())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// readDLQ reads n records from the "dlq" topic.
func readDLQ(t *testing.T, e *env, n int) []*kgo.Record {
	t.Helper()
	cl := e.client(kgo.ConsumeTopics("dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d DLQ records", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, k string) string {
	v, _ := eventid.Header(r, k)
	return v
}

type kgoRecord = kgo.Record

func recordNilKey(topic string, seq int) *kgo.Record {
	return &kgo.Record{Topic: topic, Value: []byte("nil|" + strconv.Itoa(seq))}
}

// runAll runs a consumer with cfg until rec has seen all its messages and
// the consumer has written wantDLQ records to the dead-letter topic, then
// shuts it down cleanly and returns it for its Stats.
func runAll(t *testing.T, cfg Config, rec *recorder, wantDLQ int64) *Consumer {
	t.Helper()
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	return runUntil(t, c, rec.wait, wantDLQ)
}

// runUntil runs c until wait returns and wantDLQ records were
// dead-lettered, then shuts it down cleanly and returns it.
func runUntil(t *testing.T, c *Consumer, wait func(*testing.T), wantDLQ int64) *Consumer {
	t.Helper()
	stop := start(t, c)
	wait(t)
	if wantDLQ > 0 {
		eventually(t, "DLQ writes", func() bool { return c.Stats().DeadLettered == wantDLQ })
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return c
}

// memberID returns the member ID of group's only member, as the broker
// knows it (reading the consumer's client from the test would race with
// Run, which sets it).
func memberID(t *testing.T, e *env, group string) string {
	t.Helper()
	var id string
	eventually(t, "one member of "+group, func() bool {
		gs, err := kadm.NewClient(e.client()).DescribeGroups(context.Background(), group)
		if err != nil {
			return false
		}
		g, ok := gs[group]
		if !ok || g.Err != nil || len(g.Members) != 1 {
			return false
		}
		id = g.Members[0].MemberID
		return true
	})
	return id
}
