package consumer

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeMinimal is the limit of the dispatch itself, the yardstick for
// lanes' per-record cost: one group member polls, and each record goes to
// a per-key FIFO (created on the key's first record, removed when empty)
// drained by GOMAXPROCS workers from a run queue, one wake per poll. It
// keeps per-key order but tracks no offsets, commits nothing and gives no
// handler a context, a timeout or a retry: what lanes does on top is what
// the ratio lanes ÷ minimal prices.
func consumeMinimal(b *testing.B, addrs []string, topic string, work time.Duration) time.Duration {
	total := int64(benchSessions * benchTopics[topic])
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(nextGroup()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	d := newMinimalDispatch(total, func(*kgo.Record) {
		if work > 0 {
			time.Sleep(work)
		}
	})
	start := time.Now()
	for seen := 0; int64(seen) < total; {
		fs := cl.PollRecords(context.Background(), 512)
		recs := fs.Records()
		seen += len(recs)
		d.add(recs)
	}
	<-d.all
	elapsed := time.Since(start)
	d.stop()
	return elapsed
}

// minimalDispatch is consumeMinimal's per-key FIFOs and workers.
type minimalDispatch struct {
	handle func(*kgo.Record)
	mu     sync.Mutex
	cond   sync.Cond
	lanes  map[string]*minimalLane
	runq   []*minimalLane
	closed bool
	total  int64
	done   atomic.Int64
	all    chan struct{} // closed once total records were handled
	wg     sync.WaitGroup
}

type minimalLane struct {
	key   string
	queue []*kgo.Record
}

func newMinimalDispatch(total int64, handle func(*kgo.Record)) *minimalDispatch {
	d := &minimalDispatch{handle: handle, lanes: map[string]*minimalLane{}, total: total, all: make(chan struct{})}
	d.cond.L = &d.mu
	for range runtime.GOMAXPROCS(0) {
		d.wg.Add(1)
		go d.work()
	}
	return d
}

// add queues a poll's records to their keys' lanes and wakes the workers
// once.
func (d *minimalDispatch) add(recs []*kgo.Record) {
	d.mu.Lock()
	for _, r := range recs {
		l := d.lanes[string(r.Key)]
		if l == nil {
			l = &minimalLane{key: string(r.Key)}
			d.lanes[l.key] = l
			d.runq = append(d.runq, l)
		}
		l.queue = append(l.queue, r)
	}
	d.mu.Unlock()
	d.cond.Broadcast()
}

// work drains lanes from the run queue: a lane is either queued or held by
// one worker, never both, so each key's records run one at a time, in order.
func (d *minimalDispatch) work() {
	defer d.wg.Done()
	d.mu.Lock()
	for {
		for len(d.runq) == 0 && !d.closed {
			d.cond.Wait()
		}
		if len(d.runq) == 0 {
			d.mu.Unlock()
			return
		}
		l := d.runq[0]
		d.runq = d.runq[1:]
		q := l.queue
		l.queue = nil
		d.mu.Unlock()
		for _, r := range q {
			d.handle(r)
		}
		n := int64(len(q))
		if after := d.done.Add(n); after >= d.total && after-n < d.total {
			close(d.all)
		}
		d.mu.Lock()
		if len(l.queue) == 0 {
			delete(d.lanes, l.key)
		} else {
			d.runq = append(d.runq, l)
		}
	}
}

// stop ends the workers.
func (d *minimalDispatch) stop() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cond.Broadcast()
	d.wg.Wait()
}
