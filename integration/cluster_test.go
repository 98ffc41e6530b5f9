package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cluster is the broker a scenario runs on: real Kafka when LANES_BROKERS
// is set (CI always sets it), an in-process kfake broker otherwise.
type cluster struct {
	*lanestest.Broker
	brokers []string
	real    bool
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if b := os.Getenv("LANES_BROKERS"); b != "" {
		br := lanestest.ConnectBroker(strings.Split(b, ","))
		return &cluster{Broker: br, brokers: br.Addrs(), real: true}
	}
	br, err := lanestest.NewBroker(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(br.Close)
	return &cluster{Broker: br, brokers: br.Addrs()}
}

func (c *cluster) name() string {
	if c.real {
		return "kafka"
	}
	return "kfake"
}

func (c *cluster) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.Client(opts...)
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, int32(partitions), topic, dlq); err != nil {
		t.Fatal(err)
	}
	return topic, dlq
}

// produce sends per messages for each session through the lanes producer,
// interleaved, value "session|seq", event ID from (session, seq); each
// ledger records the acknowledgements (one per group that consumes them).
func (c *cluster) produce(t *testing.T, topic string, sessions []string, per int, ls ...*lanestest.Ledger) {
	t.Helper()
	c.produceRange(t, topic, sessions, 0, per, ls...)
}

// produceRange is produce for seqs [from, to).
func (c *cluster) produceRange(t *testing.T, topic string, sessions []string, from, to int, ls ...*lanestest.Ledger) {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, DeliveryTimeout: 2 * time.Minute, ClientOptions: c.Opts()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var failed atomic.Int64
	var firstErr atomic.Value
	for seq := from; seq < to; seq++ {
		for _, s := range sessions {
			p.SendAsync(context.Background(), s, []byte(s+"|"+strconv.Itoa(seq)), func(res producer.Result, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				for _, l := range ls {
					l.Acked(s, seq, res.EventID)
				}
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
func (c *cluster) readDLQ(t *testing.T, dlq string, l *lanestest.Ledger) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := lanestest.ReadDeadLetters(ctx, c.Broker, dlq, l)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// faults is the fault plan of a scenario's handler.
type faults struct {
	transient float64         // probability an attempt fails transiently
	permanent map[string]bool // "session|seq" that fail permanently
	work      time.Duration   // handler time per call (up to, uniformly)
	slow      float64         // probability a call takes slowWork instead
	slowWork  time.Duration
}

var errTransient = errors.New("injected transient failure")

// handler returns a handler that applies f, with every call recorded in l.
func handler(member string, l *lanestest.Ledger, f faults) consumer.Handler {
	return l.Handler(member, faulty(f))
}

// faulty is a handler that only applies f.
func faulty(f faults) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		session, seq, _ := strings.Cut(string(m.Record.Value), "|")
		switch {
		case f.slow > 0 && rand.Float64() < f.slow:
			time.Sleep(f.slowWork) // simulated work, not synchronisation
		case f.work > 0:
			time.Sleep(time.Duration(rand.Int64N(int64(f.work)))) // simulated work, not synchronisation
		}
		switch {
		case f.permanent[session+"|"+seq]:
			return consumer.Permanent(errors.New("injected poison"))
		case f.transient > 0 && rand.Float64() < f.transient:
			return errTransient
		}
		return nil
	})
}

// consumerConfig is the scenarios' consumer configuration: quick retries
// with a budget transient faults never exhaust, and fast commits; the group
// protocol of LANES_GROUP_PROTOCOL (its own group per protocol), the
// cluster's TLS and SASL options.
func (c *cluster) consumerConfig(group, topic, dlq string) consumer.Config {
	var log *slog.Logger // nil: slog.Default(), discarded unless LANES_TEST_LOG is set (TestMain)
	if os.Getenv("LANES_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts := append(c.Opts(), protocolOpts()...)
	if os.Getenv("LANES_TEST_KGO_LOG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return consumer.Config{
		Slog:    log,
		Brokers: c.brokers, Group: groupName(group), Topics: []string{topic}, DeadLetterTopic: dlq,
		CommitInterval: 200 * time.Millisecond,
		Retry:          consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 40},
		RevokeTimeout:  20 * time.Second,
		ClientOptions:  opts,
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

// waitFinished waits until the ledger has n messages accounted for, or
// fails after limit.
func waitFinished(t *testing.T, l *lanestest.Ledger, n int, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := l.WaitAccounted(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func sessionNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chat-%05d", i)
	}
	return out
}

// assertClean fails on any violation, overlap, regression or loss, and
// logs the report (the figures in docs/testing.md).
func assertClean(t *testing.T, c *cluster, r lanestest.Report, took time.Duration, allowRegressions bool) {
	t.Helper()
	t.Logf("%s [%s, %v]", r, c.name(), took.Round(time.Millisecond))
	for _, d := range r.Details {
		t.Log(d)
	}
	if err := r.Err(allowRegressions); err != nil {
		t.Fatal(err)
	}
}
