package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/producer"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cluster is the broker a scenario runs on: real Kafka when LANES_BROKERS
// is set (CI always sets it), an in-process kfake broker otherwise.
type cluster struct {
	brokers []string
	real    bool
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if b := os.Getenv("LANES_BROKERS"); b != "" {
		return &cluster{brokers: strings.Split(b, ","), real: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &cluster{brokers: c.ListenAddrs()}
}

func (c *cluster) name() string {
	if c.real {
		return "kafka"
	}
	return "kfake"
}

func (c *cluster) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// topics creates a fresh topic and its DLQ with the given partitions.
func (c *cluster) topics(t *testing.T, partitions int) (topic, dlq string) {
	t.Helper()
	topic = fmt.Sprintf("it-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	dlq = topic + "-dlq"
	cl := c.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{topic, dlq} {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
	return topic, dlq
}

// produce sends per messages for each session through the lanes producer,
// interleaved, value "session|seq", event ID from (session, seq).
func (c *cluster) produce(t *testing.T, topic string, sessions []string, per int, l *Ledger) {
	t.Helper()
	c.produceRange(t, topic, sessions, 0, per, l)
}

// produceRange is produce for seqs [from, to).
func (c *cluster) produceRange(t *testing.T, topic string, sessions []string, from, to int, l *Ledger) {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, DeliveryTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var failed atomic.Int64
	var firstErr atomic.Value
	for seq := from; seq < to; seq++ {
		for _, s := range sessions {
			p.SendAsync(context.Background(), s, []byte(s+"|"+strconv.Itoa(seq)), func(r producer.Result, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				l.Sent(s, seq, r.EventID)
			}, producer.WithSequence(uint64(seq)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d sends failed, first: %v", n, firstErr.Load())
	}
}

// readDLQ reads the dead-letter topic to its end into the ledger and
// returns its records.
func (c *cluster) readDLQ(t *testing.T, dlq string, l *Ledger) []*kgo.Record {
	t.Helper()
	cl := c.client(t, kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d DLQ records", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	for _, r := range out {
		reason, _ := eventid.Header(r, consumer.HeaderDLQReason)
		l.DeadLettered(eventid.FromRecord(r), reason)
	}
	return out
}

// faults is the fault plan of a scenario's handler.
type faults struct {
	transient float64         // probability an attempt fails transiently
	permanent map[string]bool // "session|seq" that fail permanently
	work      time.Duration   // handler time per call (up to, uniformly)
}

var errTransient = errors.New("injected transient failure")

// handler returns a handler that applies f and records every call.
func handler(member string, l *Ledger, f faults) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		start := time.Now()
		session, seqText, _ := strings.Cut(string(m.Record.Value), "|")
		seq, _ := strconv.Atoi(seqText)
		if f.work > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(f.work))))
		}
		var err error
		switch {
		case f.permanent[session+"|"+seqText]:
			err = consumer.Permanent(errors.New("injected poison"))
		case f.transient > 0 && rand.Float64() < f.transient:
			err = errTransient
		}
		l.Handled(Call{Member: member, Session: session, Seq: seq, EventID: m.EventID,
			Partition: m.Record.Partition, Offset: m.Record.Offset, Attempt: m.Attempt,
			Start: start, End: time.Now(), Final: err == nil || consumer.IsPermanent(err), OK: err == nil})
		return err
	})
}

// consumerConfig is the scenarios' consumer configuration: quick retries
// with a budget transient faults never exhaust, and fast commits.
func (c *cluster) consumerConfig(group, topic, dlq string) consumer.Config {
	var log *zerolog.Logger
	if os.Getenv("LANES_TEST_LOG") != "" {
		l := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
		log = &l
	}
	return consumer.Config{
		Logger:  log,
		Brokers: c.brokers, Group: group, Topics: []string{topic}, DeadLetterTopic: dlq,
		CommitInterval: 200 * time.Millisecond,
		Retry:          consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 40},
		RevokeTimeout:  20 * time.Second,
	}
}

// member is one running consumer instance.
type member struct {
	name string
	c    *consumer.Consumer
	stop func() error
}

// startMember runs a consumer until its stop is called.
func startMember(t *testing.T, name string, cfg consumer.Config, h consumer.Handler) *member {
	t.Helper()
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	m := &member{name: name, c: c}
	m.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(2 * time.Minute):
				runErr = errors.New("Run did not return within 2 minutes of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = m.stop() })
	return m
}

// waitFinished waits until the ledger has n finished messages, or fails.
func waitFinished(t *testing.T, l *Ledger, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := -1, time.Now()
	for {
		got := l.Finished()
		if got >= n {
			return
		}
		if got != last {
			last, lastAt = got, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d of %d messages finished (no progress for %v)", got, n, time.Since(lastAt).Round(time.Millisecond))
		}
		<-tick.C
	}
}

func sessionNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chat-%05d", i)
	}
	return out
}

// assertClean fails on any violation, regression or loss, logs the report,
// and records it for docs/testing.md.
func assertClean(t *testing.T, c *cluster, r Report, took time.Duration, allowRegressions bool) {
	t.Helper()
	t.Logf("%s [%s, %v]", r, c.name(), took.Round(time.Millisecond))
	for _, d := range r.Details {
		t.Log(d)
	}
	if r.Violations > 0 || r.Lost > 0 || (!allowRegressions && r.Regressions > 0) {
		t.Fatalf("guarantee broken: %v", r)
	}
}
