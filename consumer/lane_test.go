package consumer

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLanesOnePerSession drives the shards as the poll loop does: records of
// random sessions enqueued in order while lanes drain, end and start again.
// Every session's records are processed in order, never two at once, and
// when everything is processed no lane and no lane goroutine is left.
func TestLanesOnePerSession(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			var mu sync.Mutex
			running := map[string]bool{}
			next := map[string]int{}
			var bad []string
			set := newLaneSet(nil)
			set.process = func(l *lane, w *work) bool {
				mu.Lock()
				if running[w.lane] {
					bad = append(bad, fmt.Sprintf("%s: two records at once", w.lane))
				}
				if int(w.seq) != next[w.lane] {
					bad = append(bad, fmt.Sprintf("%s: record %d, want %d", w.lane, w.seq, next[w.lane]))
				}
				running[w.lane] = true
				mu.Unlock()
				for i := rng2(w.seq); i > 0; i-- {
					runtime.Gosched() // let other lanes and the enqueuer interleave
				}
				mu.Lock()
				running[w.lane] = false
				next[w.lane]++
				mu.Unlock()
				return false
			}
			shards := make([]*shard, 1+rng.IntN(4))
			for i := range shards {
				shards[i] = &shard{lanesOf: set, lanes: map[string]*lane{}}
			}
			sent := map[string]int{}
			for i := 0; i < 5000; i++ {
				s := fmt.Sprintf("s%d", rng.IntN(50))
				w := &work{rec: &kgo.Record{}, seq: uint64(sent[s]), lane: s, session: s}
				sent[s]++
				shards[len(s)%len(shards)].enqueue(w)
				if rng.IntN(100) == 0 {
					runtime.Gosched()
				}
			}
			set.stop()
			set.wg.Wait()
			if len(bad) > 0 {
				t.Fatalf("%d problems, first: %v", len(bad), bad[:min(len(bad), 5)])
			}
			for s, n := range sent {
				if next[s] != n {
					t.Fatalf("%s: %d of %d processed", s, next[s], n)
				}
			}
			if n := set.alive.Load(); n != 0 {
				t.Fatalf("%d lanes alive with nothing queued", n)
			}
			for _, sh := range shards {
				if len(sh.lanes) != 0 {
					t.Fatalf("%d lanes left in a shard", len(sh.lanes))
				}
			}
		})
	}
}

// rng2 is a small deterministic spin count per record.
func rng2(seq uint64) int { return int(seq*2654435761>>7) % 8 }

// TestNoLaneAfterStop: a record enqueued after the workers were stopped (a
// shutdown released its partition) never runs here; it leaves no lane.
func TestNoLaneAfterStop(t *testing.T) {
	ran := false
	set := newLaneSet(func(*lane, *work) bool { ran = true; return false })
	sh := &shard{lanesOf: set, lanes: map[string]*lane{}}
	set.stop()
	set.wg.Wait()
	sh.enqueue(&work{rec: &kgo.Record{}, lane: "s", session: "s"})
	set.wg.Wait()
	if ran || len(sh.lanes) != 0 || set.alive.Load() != 0 {
		t.Fatalf("after stop: ran %v, %d lanes, %d alive", ran, len(sh.lanes), set.alive.Load())
	}
}

// TestBatchOnePartition: a batch holds records of one partition only, so
// the head's fence (a revoke) covers all of it.
func TestBatchOnePartition(t *testing.T) {
	a, b := &partition{}, &partition{}
	set := newLaneSet(nil)
	sh := &shard{lanesOf: set, lanes: map[string]*lane{}}
	l := &lane{key: "s", s: sh}
	for _, p := range []*partition{a, a, b, a} {
		l.queue = append(l.queue, &work{p: p})
	}
	sh.lanes["s"] = l
	for i, want := range []struct {
		n int
		p *partition
	}{{2, a}, {1, b}, {1, a}} {
		got := sh.nextN(l, 10)
		if len(got) != want.n || got[0].p != want.p {
			t.Fatalf("batch %d: %d records, want %d of one partition", i, len(got), want.n)
		}
		for _, w := range got {
			if w.p != got[0].p {
				t.Fatalf("batch %d mixes partitions", i)
			}
		}
	}
}
