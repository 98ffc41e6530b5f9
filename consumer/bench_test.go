package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Benchmarks run end to end on the embedded broker: 1,000 sessions over 12
// partitions, 100 messages each on topic "bench" and 20 each on
// "bench-slow" (the 5 ms handler). Each iteration consumes the whole topic with
// a fresh group and reports msgs/s; lanes and its baselines run in the same
// process, on the same records, so their ratio is what matters.
const (
	benchSessions   = 1000
	benchPartitions = 12
)

// benchTopics: topic → messages per session.
var benchTopics = map[string]int{"bench": 100, "bench-slow": 20}

var (
	benchOnce    sync.Once
	benchCluster *kfake.Cluster
	benchGroupID atomic.Int64
)

func benchEnv(b *testing.B) []string {
	benchOnce.Do(func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchPartitions, "bench", "bench-slow", "bench-batch", "bench-dlq"))
		if err != nil {
			b.Fatal(err)
		}
		benchCluster = c
		cl, _ := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
		defer cl.Close()
		var recs []*kgo.Record
		for topic, per := range benchTopics {
			for seq := 0; seq < per; seq++ {
				for s := 0; s < benchSessions; s++ {
					k := fmt.Sprintf("chat-%04d", s)
					recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(fmt.Sprintf("%s|%d", k, seq))})
				}
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	})
	return benchCluster.ListenAddrs()
}

func nextGroup() string { return fmt.Sprintf("bench-%d", benchGroupID.Add(1)) }

// consumeLanes runs a lanes consumer until every record was handled once.
func consumeLanes(b *testing.B, addrs []string, topic string, work time.Duration) time.Duration {
	return consumeLanesWith(b, addrs, topic, work, nil)
}

// consumeLanesTraced is consumeLanes with an OpenTelemetry SDK tracer
// provider that samples and records every span (exporting nowhere).
func consumeLanesTraced(b *testing.B, addrs []string, topic string, work time.Duration) time.Duration {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	return consumeLanesWith(b, addrs, topic, work, tp)
}

// consumeLanesControlled is consumeLanes with per-session control on and
// one session (not one of the bench's) paused: every record is admitted
// through the control gate's lock, its worst case.
func consumeLanesControlled(b *testing.B, addrs []string, topic string, work time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := nextGroup()
	if _, err := PauseSession(ctx, ControlTarget{Brokers: addrs, Group: group}, topic, "nobody", "bench"); err != nil {
		b.Fatal(err)
	}
	return consumeLanesWith(b, addrs, topic, work, nil, func(cfg *Config) {
		cfg.Group = group
		cfg.Control = ControlPolicy{Enabled: true}
	})
}

func consumeLanesWith(b *testing.B, addrs []string, topic string, work time.Duration, tp trace.TracerProvider, edits ...func(*Config)) time.Duration {
	tally := newSessionTally(benchTopics[topic])
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		if work > 0 {
			time.Sleep(work)
		}
		tally.handled(m.Record.Key)
		return nil
	})
	cfg := Config{Brokers: addrs, Group: nextGroup(), Topics: []string{topic}, DeadLetterTopic: "bench-dlq", TracerProvider: tp}
	for _, e := range edits {
		e(&cfg)
	}
	c, err := New(cfg, h)
	if err != nil {
		b.Fatal(err)
	}
	return runTimed(b, c, tally.done)
}

// sessionTally counts handled messages per session, each session's count
// on its own cache line, and closes done once every session had all of its
// messages. A handler that counted every message on one shared counter
// would make the two cores fight over that line on every call, a cost of
// the benchmark, not of lanes (the minimal dispatcher counts per batch).
type sessionTally struct {
	per      int64 // messages per session
	sessions [benchSessions]struct {
		n atomic.Int64
		_ [56]byte
	}
	left atomic.Int64 // sessions not yet complete
	done chan struct{}
}

func newSessionTally(per int) *sessionTally {
	t := &sessionTally{per: int64(per), done: make(chan struct{})}
	t.left.Store(benchSessions)
	return t
}

// handled counts one message of the session whose key is "chat-NNNN".
func (t *sessionTally) handled(key []byte) {
	i := 0
	for _, d := range key[len(key)-4:] {
		i = i*10 + int(d-'0')
	}
	if t.sessions[i].n.Add(1) == t.per && t.left.Add(-1) == 0 {
		close(t.done)
	}
}

// runTimed runs c until done is closed and returns how long that took.
func runTimed(b *testing.B, c *Consumer, done <-chan struct{}) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- c.Run(ctx) }()
	<-done
	elapsed := time.Since(start)
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return elapsed
}

// consumeRaw polls the records with plain franz-go in one group member.
// With work == 0 it only counts them; with work > 0 it handles them the
// usual way to get ordering without lanes: one goroutine per partition, each
// handling its partition's records one at a time. That baseline is slow, so
// it queues every record but stops timing after perPartitionSample handled.
func consumeRaw(b *testing.B, addrs []string, topic string, work time.Duration) time.Duration {
	total := benchSessions * benchTopics[topic]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(nextGroup()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var (
		handled atomic.Int64
		done    = make(chan struct{})
		queues  = map[int32]chan struct{}{}
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	worker := func(q chan struct{}) {
		defer wg.Done()
		for range q {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(work)
			if handled.Add(1) == perPartitionSample {
				close(done)
			}
		}
	}
	start := time.Now()
	for seen := 0; seen < total; {
		fs := cl.PollRecords(context.Background(), 512)
		if work == 0 {
			seen += fs.NumRecords()
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			q := queues[r.Partition]
			if q == nil {
				q = make(chan struct{}, benchSessions*benchTopics[topic])
				queues[r.Partition] = q
				wg.Add(1)
				go worker(q)
			}
			q <- struct{}{}
			seen++
		})
	}
	if work > 0 {
		<-done
	}
	elapsed := time.Since(start)
	close(stop)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	return elapsed
}

// perPartitionSample is how many records the per-partition baseline
// handles: about a second's worth at 12 partitions × 200 msgs/s.
const perPartitionSample = 2400

func report(b *testing.B, topic string, total time.Duration) {
	b.ReportMetric(float64(benchSessions*benchTopics[topic]*b.N)/total.Seconds(), "msgs/s")
}

// BenchmarkEndToEnd/lanes and /raw-poll: zero-work handler. Targets:
// lanes ≥ 0.5 × raw franz-go polling, and ≥ 0.75 × /minimal, a per-key
// dispatcher with no offset tracking and no commits (the limit of the
// dispatch itself). /lanes-traced adds a recording OpenTelemetry SDK
// tracer: the cost of tracing every attempt.
func BenchmarkEndToEnd(b *testing.B) {
	addrs := benchEnv(b)
	for _, bc := range []struct {
		name string
		run  func(*testing.B, []string, string, time.Duration) time.Duration
	}{{"raw-poll", consumeRaw}, {"minimal", consumeMinimal}, {"lanes", consumeLanes}, {"lanes-controlled", consumeLanesControlled}, {"lanes-traced", consumeLanesTraced}} {
		b.Run(bc.name, func(b *testing.B) {
			var total, cpu time.Duration
			for i := 0; i < b.N; i++ {
				before := processCPU(b)
				total += bc.run(b, addrs, "bench", 0)
				cpu += processCPU(b) - before
			}
			report(b, "bench", total)
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(benchSessions*benchTopics["bench"]*b.N), "cpu-ns/msg")
		})
	}
}

// BenchmarkSlowHandler: every message takes 5 ms. The bound for lanes is
// sessions/5ms (every session busy all the time); the baseline is one
// goroutine per partition (12 lanes at most). Target: lanes ≥ 0.7 × bound.
func BenchmarkSlowHandler(b *testing.B) {
	addrs := benchEnv(b)
	const work = 5 * time.Millisecond
	for _, bc := range []struct {
		name string
		run  func(*testing.B, []string, string, time.Duration) time.Duration
	}{{"per-partition", consumeRaw}, {"lanes", consumeLanes}} {
		b.Run(bc.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += bc.run(b, addrs, "bench-slow", work)
			}
			if bc.name == "per-partition" {
				b.ReportMetric(float64(perPartitionSample*b.N)/total.Seconds(), "msgs/s")
			} else {
				report(b, "bench-slow", total)
			}
			b.ReportMetric(float64(benchSessions)/work.Seconds(), "bound-msgs/s")
		})
	}
}
