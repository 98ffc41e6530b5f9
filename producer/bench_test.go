package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSendAsync compares lanes' SendAsync with franz-go's Produce of
// the same records (same key, value and lanes headers) on the embedded
// broker, in one run. Target: lanes ≥ 0.8 × raw.
func BenchmarkSendAsync(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(12, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("chat-%04d", i)
	}
	value := []byte("book a flight to London, then make it Paris")

	b.Run("raw-produce", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("bench"),
			kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s := sessions[i%len(sessions)]
			r := &kgo.Record{Key: []byte(s), Value: value}
			eventid.Stamp(r, eventid.New(), s)
			wg.Add(1)
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("lanes-SendAsync", func(b *testing.B) {
		p, err := New(Config{Brokers: c.ListenAddrs(), Topic: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			wg.Add(1)
			p.SendAsync(context.Background(), sessions[i%len(sessions)], value, func(_ Result, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
