package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// load produces up to per messages for each session in rounds (one
// message per session a round), a round every pace, through one lanes
// producer with acks=all and idempotence, so that sends go on while the
// scenario's faults happen, until per rounds are sent or stop is called.
// Bounded: per rounds, and each send by the producer's delivery timeout.
type load struct {
	cancel  context.CancelFunc
	quit    chan struct{}
	stopped sync.Once
	done    chan struct{}
	rounds  int // rounds sent, once done is closed
	failed  atomic.Int64
	mu      sync.Mutex
	firstEr error
}

func (fc *faultCluster) startLoad(t *testing.T, topic string, sessions []string, per int, pace time.Duration, l *lanestest.Ledger) *load {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: fc.brokers, Topic: topic, DeliveryTimeout: 2 * time.Minute,
		ClientOptions: append(fc.Opts(), kgo.RequiredAcks(kgo.AllISRAcks()))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ld := &load{cancel: cancel, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		defer p.Close()
		tick := time.NewTicker(pace)
		defer tick.Stop()
	rounds:
		for ld.rounds < per && ctx.Err() == nil {
			for _, s := range sessions {
				l.SendAsync(ctx, p, s, ld.rounds, []byte(s+"|"+strconv.Itoa(ld.rounds)), ld.note)
			}
			ld.rounds++
			select {
			case <-tick.C:
			case <-ld.quit:
				break rounds
			case <-ctx.Done():
			}
		}
		fctx, fcancel := context.WithTimeout(ctx, 3*time.Minute)
		defer fcancel()
		if err := p.Flush(fctx); err != nil {
			ld.note(fmt.Errorf("flush: %w", err))
		}
	}()
	t.Cleanup(func() { cancel(); <-ld.done })
	return ld
}

// stop ends the load after the round under way.
func (ld *load) stop() { ld.stopped.Do(func() { close(ld.quit) }) }

// running reports whether the load still sends.
func (ld *load) running() bool {
	select {
	case <-ld.done:
		return false
	default:
		return true
	}
}

func (ld *load) note(err error) {
	if err == nil {
		return
	}
	ld.failed.Add(1)
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.firstEr == nil {
		ld.firstEr = err
	}
}

// wait waits until every send was acknowledged (or failed, failing the
// test), for at most limit.
func (ld *load) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-ld.done:
	case <-time.After(limit):
		ld.cancel()
		<-ld.done
		t.Fatalf("the producer did not finish within %v", limit)
	}
	if n := ld.failed.Load(); n > 0 {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		t.Fatalf("%d sends failed with acks=all through the fault, first: %v", n, ld.firstEr)
	}
}

// checkLog reads topic from its start to its end and fails unless every
// session's messages are in it exactly once each, in seq order: the
// idempotent acks=all producer kept order and wrote no duplicate through
// the fault.
func (fc *faultCluster) checkLog(t *testing.T, topic string, sessions []string, per int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(fc.admin).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets of %s: %v %v", topic, err, ends.Error())
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl := fc.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	next := map[string]int{}
	var got int64
	var bad []string
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %d of %d records", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			s, seqText, _ := strings.Cut(string(r.Value), "|")
			seq := atoi(seqText)
			if seq != next[s] && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("%s: seq %d at %d/%d, want %d", s, seq, r.Partition, r.Offset, next[s]))
			}
			if seq >= next[s] {
				next[s] = seq + 1
			}
		})
	}
	for _, s := range sessions {
		if next[s] != per && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("%s: log ends at seq %d, want %d", s, next[s]-1, per-1))
		}
	}
	if len(bad) > 0 || want != int64(len(sessions)*per) {
		t.Fatalf("the log of %s holds %d records for %d sent: %v", topic, want, len(sessions)*per, bad)
	}
	t.Logf("log of %s: %d records, every session in order, no duplicate", topic, want)
}
