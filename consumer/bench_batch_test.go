package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkBatch: a handler that costs a fixed 1 ms per call (a database
// round trip) plus 10 µs per message, over 50 sessions with 1,000 messages
// each waiting (topic "bench-batch", 12 partitions, on the shared embedded
// broker). /single calls it per message (New); /batch-N hands it up to N
// queued messages per call (NewBatch, MaxBatch N). bound-msgs/s is what the
// handler allows a single-message consumer: sessions / 1.01 ms.
func BenchmarkBatch(b *testing.B) {
	addrs := batchBenchEnv(b)
	for _, max := range []int{0, 8, 64} {
		name := "single"
		if max > 0 {
			name = fmt.Sprintf("batch-%d", max)
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += consumeBatched(b, addrs, max)
			}
			b.ReportMetric(float64(batchBenchSessions*batchBenchPer*b.N)/total.Seconds(), "msgs/s")
			b.ReportMetric(float64(batchBenchSessions)/(batchCallCost+batchMsgCost).Seconds(), "bound-msgs/s")
		})
	}
}

const (
	batchBenchSessions = 50
	batchBenchPer      = 1000
	batchCallCost      = time.Millisecond
	batchMsgCost       = 10 * time.Microsecond
)

var batchBenchOnce sync.Once

func batchBenchEnv(b *testing.B) []string {
	addrs := benchEnv(b)
	batchBenchOnce.Do(func() {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
			kgo.DefaultProduceTopic("bench-batch"))
		defer cl.Close()
		var recs []*kgo.Record
		for seq := 0; seq < batchBenchPer; seq++ {
			for s := 0; s < batchBenchSessions; s++ {
				k := fmt.Sprintf("batch-%02d", s)
				recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprintf("%s|%d", k, seq))})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	})
	return addrs
}

// consumeBatched consumes "bench-batch" with a fresh group, per message
// (max 0) or in batches of up to max, until every record was handled once.
func consumeBatched(b *testing.B, addrs []string, max int) time.Duration {
	total := int64(batchBenchSessions * batchBenchPer)
	var n atomic.Int64
	done := make(chan struct{})
	count := func(k int) {
		if n.Add(int64(k)) == total {
			close(done)
		}
	}
	cfg := Config{Brokers: addrs, Group: nextGroup(), Topics: []string{"bench-batch"}, DeadLetterTopic: "bench-dlq", MaxBatch: max}
	var c *Consumer
	var err error
	if max == 0 {
		c, err = New(cfg, HandlerFunc(func(ctx context.Context, m *Message) error {
			time.Sleep(batchCallCost + batchMsgCost)
			count(1)
			return nil
		}))
	} else {
		c, err = NewBatch(cfg, BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
			time.Sleep(batchCallCost + time.Duration(len(ms))*batchMsgCost)
			count(len(ms))
			return nil
		}))
	}
	if err != nil {
		b.Fatal(err)
	}
	return runTimed(b, c, done)
}
