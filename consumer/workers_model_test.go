package consumer

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/hashring"
)

// The run queue's model-based test: random polls (records of random
// sessions added to their lanes, the fresh lanes started together, as
// handOut does), handlers that block until released or return at once,
// releases, and a stop with handlers still blocked. After every step the
// lanes must settle: every session with work has its head inside the
// handler, blocked — no lane waits in the run queue while every worker is
// inside a blocked record (a lost wake-up, or a lane waiting for another
// lane's handler). Throughout: each session's records in order, never two
// at once; at the end every record handled, no lane and no worker left.

type laneModel struct {
	t      *testing.T
	rng    *rand.Rand
	set    *laneSet
	shards []*shard

	mu       sync.Mutex
	cond     *sync.Cond
	sent     map[string]int
	handled  map[string]int
	inside   map[string]bool
	gate     map[*work]chan struct{}  // records that block until released
	blocked  map[string]chan struct{} // sessions blocked inside the handler, not released
	bad      []string
	timedOut bool
	steps    []string
}

func newLaneModel(t *testing.T, seed uint64, batch bool) *laneModel {
	m := &laneModel{t: t, rng: rand.New(rand.NewPCG(seed, 17)),
		sent: map[string]int{}, handled: map[string]int{}, inside: map[string]bool{},
		gate: map[*work]chan struct{}{}, blocked: map[string]chan struct{}{}}
	m.cond = sync.NewCond(&m.mu)
	m.set = newLaneSet(func(l *lane, w *work) bool { m.handle(l, []*work{w}); return false })
	if batch {
		m.set.process = nil
		m.set.batch, m.set.maxBatch = func(l *lane, ws []*work) bool { m.handle(l, ws); return false }, 1+int(seed%4)
	}
	m.shards = make([]*shard, 1+m.rng.IntN(4))
	for i := range m.shards {
		m.shards[i] = &shard{lanesOf: m.set, lanes: map[string]*lane{}}
	}
	return m
}

// handle is the handler: it checks order and exclusion, then blocks on the
// gate of the first gated record of ws, if any.
func (m *laneModel) handle(l *lane, ws []*work) {
	s := ws[0].lane
	m.mu.Lock()
	if m.inside[s] {
		m.bad = append(m.bad, s+": two handler calls at once")
	}
	var g chan struct{}
	for i, w := range ws {
		if w.lane != s || l.key != s {
			m.bad = append(m.bad, fmt.Sprintf("%s: record of %s in lane %s", s, w.lane, l.key))
		}
		if want := m.handled[s] + i; int(w.seq) != want {
			m.bad = append(m.bad, fmt.Sprintf("%s: record %d, want %d", s, w.seq, want))
		}
		if g == nil {
			g = m.gate[w]
		}
		delete(m.gate, w)
	}
	m.inside[s] = true
	if g != nil {
		m.blocked[s] = g
	}
	m.cond.Broadcast()
	m.mu.Unlock()
	if g != nil {
		<-g
	} else {
		for i := rng2(ws[0].seq); i > 0; i-- {
			runtime.Gosched()
		}
	}
	m.mu.Lock()
	m.inside[s] = false
	m.handled[s] += len(ws)
	m.cond.Broadcast()
	m.mu.Unlock()
}

func (m *laneModel) logf(format string, args ...any) {
	m.steps = append(m.steps, fmt.Sprintf(format, args...))
}

func (m *laneModel) fail(format string, args ...any) {
	m.t.Helper()
	m.set.mu.Lock()
	state := fmt.Sprintf("run queue %d, waiting %d, available %d, parked %d, alive %d",
		len(m.set.runq), m.set.waiting.Load(), m.set.avail.Load(), len(m.set.parked), m.set.alive.Load())
	m.set.mu.Unlock()
	tail := m.steps[max(len(m.steps)-20, 0):]
	m.t.Fatalf("%s\nlaneSet: %s\nlast steps:\n  %s", fmt.Sprintf(format, args...), state, strings.Join(tail, "\n  "))
}

// poll adds 1..20 records of random sessions, then starts the fresh lanes
// together, as the poll loop (or a stash's drain) does.
func (m *laneModel) poll() {
	n := 1 + m.rng.IntN(20)
	var fresh []*lane
	m.mu.Lock()
	for range n {
		s := fmt.Sprintf("s%d", m.rng.IntN(30))
		w := &work{rec: &kgo.Record{}, seq: uint64(m.sent[s]), lane: s, session: s}
		m.sent[s]++
		if m.rng.IntN(2) == 0 {
			m.gate[w] = make(chan struct{})
		}
		m.mu.Unlock() // the handler takes m.mu: never hold it across add
		if l := m.shards[hashring.Jump(hashring.Sum64(s), len(m.shards))].add(w); l != nil {
			fresh = append(fresh, l)
		}
		m.mu.Lock()
	}
	m.mu.Unlock()
	m.logf("poll: %d records, %d fresh lanes", n, len(fresh))
	if len(fresh) > 0 {
		m.set.startAll(fresh)
	}
}

// release lets one blocked handler return.
func (m *laneModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.blocked) == 0 {
		return
	}
	keys := make([]string, 0, len(m.blocked))
	for s := range m.blocked {
		keys = append(keys, s)
	}
	s := keys[m.rng.IntN(len(keys))]
	close(m.blocked[s])
	delete(m.blocked, s)
	m.logf("release %s", s)
}

// settled reports whether every session with work is blocked inside the
// handler. m.mu held.
func (m *laneModel) settledLocked() bool {
	for s, n := range m.sent {
		if m.handled[s] < n && m.blocked[s] == nil {
			return false
		}
	}
	return true
}

// waitSettled waits until the lanes settle. It fails after a generous
// bound: without a lost wake-up they settle in microseconds.
func (m *laneModel) waitSettled(what string) {
	m.t.Helper()
	stop := time.AfterFunc(20*time.Second, func() {
		m.mu.Lock()
		m.timedOut = true
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer stop.Stop()
	m.mu.Lock()
	for !m.settledLocked() && !m.timedOut {
		m.cond.Wait()
	}
	ok, bad := m.settledLocked(), m.bad
	var waiting []string
	for s, n := range m.sent {
		if m.handled[s] < n && m.blocked[s] == nil {
			waiting = append(waiting, fmt.Sprintf("%s(inside=%v)", s, m.inside[s]))
		}
	}
	m.mu.Unlock()
	if len(bad) > 0 {
		m.fail("%d problems, first: %v", len(bad), bad[:min(len(bad), 5)])
	}
	if !ok {
		m.fail("%s: sessions with work never reached the handler while the others block: %v", what, waiting)
	}
}

func (m *laneModel) releaseAll() {
	m.mu.Lock()
	for s, g := range m.blocked {
		close(g)
		delete(m.blocked, s)
	}
	// Records not yet in the handler no longer block.
	clear(m.gate)
	m.mu.Unlock()
}

func (m *laneModel) waitAllHandled() {
	m.t.Helper()
	for {
		m.releaseAll()
		m.mu.Lock()
		all := true
		for s, n := range m.sent {
			if m.handled[s] < n {
				all = false
			}
		}
		m.mu.Unlock()
		if all {
			return
		}
		m.waitSettled("draining")
	}
}

func TestLaneSetModel(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for seed := uint64(0); seed < 24; seed++ {
			t.Run(fmt.Sprintf("batch=%v/seed=%d", batch, seed), func(t *testing.T) {
				m := newLaneModel(t, seed, batch)
				stopEarly := seed%3 == 0 // stop with handlers still blocked
				steps := 150
				for i := range steps {
					if m.rng.IntN(10) < 6 {
						m.poll()
					} else {
						m.release()
					}
					m.waitSettled(fmt.Sprintf("step %d", i))
				}
				if stopEarly {
					m.logf("stop")
					m.set.stop() // lanes queued or running still run; no new lane starts
				}
				m.waitAllHandled()
				if !stopEarly {
					m.set.stop()
				}
				m.set.wg.Wait()
				m.mu.Lock()
				bad := m.bad
				m.mu.Unlock()
				if len(bad) > 0 {
					m.fail("%d problems, first: %v", len(bad), bad[:min(len(bad), 5)])
				}
				if n := m.set.alive.Load(); n != 0 {
					m.fail("%d lanes alive with nothing queued", n)
				}
				for _, sh := range m.shards {
					if len(sh.lanes) != 0 {
						m.fail("%d lanes left in a shard", len(sh.lanes))
					}
				}
				if n := m.set.avail.Load(); n != 0 {
					m.fail("%d workers counted available after every worker ended", n)
				}
			})
		}
	}
}
