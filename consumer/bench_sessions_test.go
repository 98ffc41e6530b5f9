package consumer

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSessions: a zero-work handler over many sessions, each topic
// holding sessionsMessages records spread evenly over its sessions (12
// partitions, one kfake broker in process). It reports lanes' msgs/s, the
// peak number of goroutines and the peak heap + stacks in use above the
// baseline, per session, sampled every 25 ms while it runs, and the
// goroutines left a second after the last record was handled. Set
// LANES_BENCH_SESSIONS (a comma-separated list) to choose the session
// counts; 1,000,000 sessions with LANES_BENCH_MESSAGES=2000000 is the large
// run in
// https://github.com/lanesdev/lanes/blob/main/docs/benchmarks.md#sessions-and-memory.
func BenchmarkSessions(b *testing.B) {
	counts := []int{1000, 10_000, 100_000}
	if v := os.Getenv("LANES_BENCH_SESSIONS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("LANES_BENCH_SESSIONS: %v", err)
			}
			counts = append(counts, n)
		}
	}
	msgs := 200_000
	if v := os.Getenv("LANES_BENCH_MESSAGES"); v != "" {
		var err error
		if msgs, err = strconv.Atoi(v); err != nil {
			b.Fatalf("LANES_BENCH_MESSAGES: %v", err)
		}
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			addrs, topic := sessionsTopic(b, n, msgs)
			var total time.Duration
			var peak sample
			for i := 0; i < b.N; i++ {
				d, p := consumeSampled(b, addrs, topic, msgs)
				total += d
				peak = peak.max(p)
			}
			b.ReportMetric(float64(msgs*b.N)/total.Seconds(), "msgs/s")
			b.ReportMetric(float64(peak.goroutines), "peak-goroutines")
			b.ReportMetric(float64(peak.bytes)/float64(n), "peak-B/session")
			b.ReportMetric(float64(peak.after), "goroutines-after-1s")
		})
	}
}

// sessionsTopic starts a broker holding msgs records over n sessions.
func sessionsTopic(b *testing.B, n, msgs int) ([]string, string) {
	b.Helper()
	topic := fmt.Sprintf("sessions-%d", n)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchPartitions, topic, "bench-dlq"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < msgs; i++ {
		k := []byte(fmt.Sprintf("chat-%07d", i%n))
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: k, Value: k}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return c.ListenAddrs(), topic
}

// sample is what the sampler saw at its peak.
type sample struct {
	goroutines int
	bytes      uint64 // heap + stacks in use above the baseline
	after      int    // goroutines a second after the run
}

func (s sample) max(o sample) sample {
	return sample{max(s.goroutines, o.goroutines), max(s.bytes, o.bytes), max(s.after, o.after)}
}

func inUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// consumeSampled consumes msgs records with a zero-work handler while a
// sampler records the peak goroutines and memory.
func consumeSampled(b *testing.B, addrs []string, topic string, msgs int) (time.Duration, sample) {
	runtime.GC()
	base := inUse()
	var n atomic.Int64
	done := make(chan struct{})
	h := HandlerFunc(func(context.Context, *Message) error {
		if n.Add(1) == int64(msgs) {
			close(done)
		}
		return nil
	})
	c, err := New(Config{Brokers: addrs, Group: nextGroup(), Topics: []string{topic}, DeadLetterTopic: "bench-dlq"}, h)
	if err != nil {
		b.Fatal(err)
	}
	var peak sample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // a measurement, not synchronisation
		defer close(sampled)
		t := time.NewTicker(25 * time.Millisecond) // ReadMemStats stops the world: not too often
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				peak.goroutines = max(peak.goroutines, runtime.NumGoroutine())
				if m := inUse(); m > base {
					peak.bytes = max(peak.bytes, m-base)
				}
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- c.Run(ctx) }()
	<-done
	elapsed := time.Since(start)
	time.Sleep(time.Second) // the measure is "a second after the last record"
	peak.after = runtime.NumGoroutine()
	close(stopSampling)
	<-sampled
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return elapsed, peak
}
