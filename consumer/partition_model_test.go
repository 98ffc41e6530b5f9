package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/offsets"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// The partition's model-based test: random interleavings of fetch (with
// filtered records, records completed before the assignment, control
// records, and log truncations), stashing while full and draining the stash, start, finish
// (done or not), skip as stalled, commit (acknowledged or failed), fence
// and release, checked after every step against a small reference model of
// the same partition. Truncations are drawn only for a fetch admitted at once;
// TestStashAcrossTruncation covers the two together.

// modelRec is one fetched record as the model sees it.
type modelRec struct {
	rec     *kgo.Record
	drop    bool // Filter's verdict
	ctl     bool // a control record (transaction marker): done at admission
	offset  int64
	seq     uint64
	state   int // queued, running, finished (left its lane), none (never queued), stashed
	done    bool
	gone    bool // truncated away
	session int
}

const (
	mQueued = iota
	mRunning
	mLeft
	mNone
	mStashed
)

type partModel struct {
	t       *testing.T
	rng     *rand.Rand
	p       *partition
	max     int
	recs    []*modelRec // tracked records, then the stashed ones
	next    int64       // next offset to fetch
	newest  int64       // one past the newest offset admitted (tracked); -1 none
	start   int64
	prior   map[int64]bool
	fenced  bool
	release bool
	applied bool // the fetch state as the flow controller was told it
	told    bool // the flow controller was told something since the last drain
	cut     bool // a truncation since the last acknowledged commit
	steps   []string
}

func newPartModel(t *testing.T, seed uint64) *partModel {
	m := &partModel{t: t, rng: rand.New(rand.NewPCG(seed, 11)), max: 2 + int(seed%9), prior: map[int64]bool{}}
	m.p = newPartition(context.Background(), partKey{"t", 0}, 1, m.max, func(p *partition) {
		m.applied, m.told = p.paused, true // called outside p.mu, on this goroutine
	})
	m.start = int64(m.rng.IntN(50))
	m.next, m.newest = m.start, -1
	var rs []offsets.Range
	for o := m.start + 1; o < m.start+20; o += 1 + int64(m.rng.IntN(4)) {
		rs = append(rs, offsets.Range{Start: o, End: o})
		m.prior[o] = true
	}
	m.p.resume(m.start, rs, "meta")
	return m
}

func (m *partModel) logf(format string, args ...any) {
	m.steps = append(m.steps, fmt.Sprintf(format, args...))
}

func (m *partModel) fail(format string, args ...any) {
	m.t.Helper()
	tail := m.steps[max(len(m.steps)-25, 0):]
	m.t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (m *partModel) pick(state int) *modelRec {
	var c []*modelRec
	for _, r := range m.recs {
		if r.state == state {
			c = append(c, r)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[m.rng.IntN(len(c))]
}

func (m *partModel) stashed() []*modelRec {
	var out []*modelRec
	for _, r := range m.recs {
		if r.state == mStashed {
			out = append(out, r)
		}
	}
	return out
}

func (m *partModel) fetch() {
	n := 1 + m.rng.IntN(m.max)
	stash := m.stashed()
	if !m.fenced && !m.p.full && len(stash) == 0 && m.rng.IntN(40) == 0 && m.newest > m.start+1 { // an unclean leader election reuses offsets
		m.next = m.newest - 1 - int64(m.rng.IntN(int(min(m.newest-m.start-1, 5))))
		for _, r := range m.recs {
			if r.offset >= m.next && !r.gone {
				r.gone, r.done = true, true
			}
		}
		m.cut = true
		m.prior = map[int64]bool{} // the metadata described the old log
		m.logf("truncate to %d", m.next)
	}
	var recs []*kgo.Record
	var fetched []*modelRec
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "t", Offset: m.next}
		ctl := m.rng.IntN(10) == 0
		if ctl {
			r.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
		}
		recs = append(recs, r)
		fetched = append(fetched, &modelRec{rec: r, drop: m.rng.IntN(8) == 0, ctl: ctl, offset: r.Offset, state: mStashed,
			session: m.rng.IntN(3)})
		m.next += 1 + int64(m.rng.IntN(2))
	}
	wantHold := m.fenced || m.p.full || len(stash) > 0
	held := m.p.hold(recs, m.next)
	m.logf("fetch %d..%d fenced=%v full=%v stashed=%d -> held %v", recs[0].Offset, recs[n-1].Offset, m.fenced,
		m.p.full, len(stash), held)
	if held != wantHold {
		m.fail("hold = %v, want %v", held, wantHold)
	}
	switch {
	case m.fenced:
		m.next = recs[0].Offset
	case held:
		m.recs = append(m.recs, fetched...)
		modelStashed.Add(1)
	default:
		m.recs = append(m.recs, fetched...)
		m.admit(fetched)
	}
}

// admit admits the model's stashed records fetched (the oldest ones) and
// checks what the partition handed to lanes.
func (m *partModel) admit(fetched []*modelRec) {
	recs := make([]*kgo.Record, len(fetched))
	drop := make([]bool, len(fetched))
	for i, r := range fetched {
		recs[i], drop[i] = r.rec, r.drop
	}
	var ws []*work
	m.p.admit(recs, m.next, drop, func(i int, seq uint64) { ws = append(ws, &work{rec: recs[i], seq: seq}) })
	wi := 0
	for _, mr := range fetched {
		prior := m.prior[mr.offset]
		delete(m.prior, mr.offset)
		mr.state = mNone
		switch {
		case prior || mr.drop || mr.ctl:
			mr.done = true
		default:
			if wi >= len(ws) || ws[wi].rec != mr.rec {
				m.fail("record %d not handed to a lane", mr.offset)
			}
			mr.seq, mr.state = ws[wi].seq, mQueued
			wi++
		}
		m.newest = mr.offset + 1
	}
	if wi != len(ws) {
		m.fail("%d records handed to lanes, want %d", len(ws), wi)
	}
}

// drain is Consumer.drainStash on the model: chunks of the stash, oldest
// first, until it is empty or the partition is full.
func (m *partModel) drain() {
	m.told = false
	for {
		recs, _ := m.p.unstash(1 + m.rng.IntN(m.max))
		stash := m.stashed()
		if len(recs) == 0 {
			if len(stash) > 0 && !m.fenced && !m.p.full {
				m.fail("unstash gave nothing with %d stashed, not full", len(stash))
			}
			return
		}
		if len(recs) > len(stash) {
			m.fail("unstash gave %d records, %d stashed", len(recs), len(stash))
		}
		for i, r := range recs {
			if r != stash[i].rec {
				m.fail("unstash gave offset %d, the oldest stashed is %d", r.Offset, stash[i].offset)
			}
		}
		m.logf("drain %d..%d", recs[0].Offset, recs[len(recs)-1].Offset)
		modelDrained.Add(1)
		m.admit(stash[:len(recs)])
	}
}

func (m *partModel) step() {
	switch op := m.rng.IntN(100); {
	case op < 25:
		m.fetch()
	case op < 45:
		if r := m.pick(mQueued); r != nil {
			ok := m.p.start(r.seq)
			m.logf("start %d -> %v", r.offset, ok)
			if want := !m.fenced && !r.done; ok != want {
				m.fail("start(%d) = %v, want %v (fenced %v, done %v)", r.offset, ok, want, m.fenced, r.done)
			}
			r.state = mLeft
			if ok {
				r.state = mRunning
			}
		}
	case op < 70:
		if r := m.pick(mRunning); r != nil {
			done := m.rng.IntN(4) > 0
			m.p.finish(r.seq, done)
			m.logf("finish %d done=%v", r.offset, done)
			r.state, r.done = mLeft, r.done || done
		}
	case op < 75:
		if r := m.pick([]int{mQueued, mRunning}[m.rng.IntN(2)]); r != nil && !r.done {
			m.p.markDone(r.seq)
			m.logf("skip %d as stalled", r.offset)
			r.done = true
		}
	case op < 90:
		cp, ok := m.p.toCommit(m.rng.IntN(2) * 4096)
		m.logf("commit -> %v %d", ok, cp.offset)
		if ok && m.release {
			m.fail("a released partition wants a commit")
		}
		if ok && cp.offset > m.watermark() {
			m.fail("commit at %d passes the lowest offset not done, %d", cp.offset, m.watermark())
		}
		if ok && m.rng.IntN(5) > 0 {
			m.p.committedAt(cp)
			m.cut = false
		}
	case op < 92:
		m.p.stopStarting()
		m.fence("fence")
	case op < 93:
		m.p.release()
		m.release = true
		m.fence("release")
	case op < 100:
		m.drain()
	}
}

// fence drops the stash: those records were never tracked, the next
// owner reads them.
func (m *partModel) fence(what string) {
	m.fenced = true
	if stash := m.stashed(); len(stash) > 0 {
		m.recs = m.recs[:len(m.recs)-len(stash)]
	}
	m.logf("%s", what)
}

// watermark is the model's: the lowest offset admitted and not done, or
// one past the newest admitted.
func (m *partModel) watermark() int64 {
	for _, r := range m.recs {
		if !r.done && !r.gone && r.state != mStashed {
			return r.offset
		}
	}
	if m.newest < 0 {
		return m.start
	}
	return m.newest
}

func (m *partModel) check() {
	p := m.p
	p.mu.Lock()
	defer p.mu.Unlock()
	queued, running := 0, 0
	for _, r := range m.recs {
		switch r.state {
		case mQueued:
			queued++
		case mRunning:
			running++
		}
	}
	if p.queued != queued || p.running != running {
		m.fail("queued %d running %d, model %d %d", p.queued, p.running, queued, running)
	}
	stash := m.stashed()
	tracked := m.recs[:len(m.recs)-len(stash)]
	held := 0
	for i, r := range tracked {
		if !r.done {
			held = len(tracked) - i
			break
		}
	}
	if len(p.stash) != len(stash) {
		m.fail("%d stashed, model %d", len(p.stash), len(stash))
	}
	if wm := m.watermark(); p.tr.Watermark() != wm {
		m.fail("watermark %d, model %d", p.tr.Watermark(), wm)
	}
	if p.tr.Pending() != held {
		m.fail("held %d, model %d", p.tr.Pending(), held)
	}
	if p.full && held <= m.max/2 || !p.full && held >= m.max {
		m.fail("full %v with %d held (bound %d)", p.full, held, m.max)
	}
	if !m.fenced && (len(stash) >= max(m.max/2, 1) && !p.paused || p.paused && len(stash) == 0 && !p.full) {
		m.fail("fetch paused %v with %d stashed (full %v, bound %d)", p.paused, len(stash), p.full, m.max)
	}
	if !m.fenced && m.applied != p.paused {
		m.fail("flow told paused=%v, partition wants %v: a flip was not notified", m.applied, p.paused)
	}
	if !m.fenced && len(stash) > 0 && !p.full && !m.told {
		m.fail("freed with %d stashed and the flow controller not told to drain", len(stash))
	}
	if p.committed >= 0 && !m.cut && p.committed > m.watermark() {
		m.fail("committed %d passes the lowest offset not done, %d", p.committed, m.watermark())
	}
	select {
	case <-p.drained:
		if !m.fenced || running > 0 {
			m.fail("drained with fenced %v, %d running", m.fenced, running)
		}
	default:
		if m.fenced && running == 0 {
			m.fail("fenced with nothing running, but not drained")
		}
	}
}

// How often the model stashed a fetch and drained a stash: a run where
// either never happens tests nothing of the stash.
var modelStashed, modelDrained atomic.Int64

func TestPartitionModel(t *testing.T) {
	seeds, steps := longtest.Size(t, 400, 50), 400
	t.Cleanup(func() {
		if modelStashed.Load() == 0 || modelDrained.Load() == 0 {
			t.Errorf("the model stashed %d fetches and drained %d chunks: the stash went untested",
				modelStashed.Load(), modelDrained.Load())
		}
		t.Logf("stashed fetches %d, drained chunks %d", modelStashed.Load(), modelDrained.Load())
	})
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			m := newPartModel(t, uint64(seed))
			for i := 0; i < steps; i++ {
				m.step()
				m.check()
			}
		})
	}
}
