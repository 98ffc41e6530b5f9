package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The partition's model-based test: random interleavings of fetch (with
// filtered records, records completed before the assignment, and log
// truncations), start, finish (done or not), skip as stalled, commit
// (acknowledged or failed), fence and release, checked after every step
// against a small reference model of the same partition.

// modelRec is one fetched record as the model sees it.
type modelRec struct {
	offset  int64
	seq     uint64
	state   int // queued, running, finished (left its lane), none (never queued)
	done    bool
	gone    bool // truncated away
	session int
}

const (
	mQueued = iota
	mRunning
	mLeft
	mNone
)

type partModel struct {
	t       *testing.T
	rng     *rand.Rand
	p       *partition
	max     int
	recs    []*modelRec
	next    int64 // next offset to fetch
	newest  int64 // one past the newest offset fetched; -1 none
	start   int64
	prior   map[int64]bool
	fenced  bool
	release bool
	applied bool // the fetch state as the flow controller was told it
	cut     bool // a truncation since the last acknowledged commit
	steps   []string
}

func newPartModel(t *testing.T, seed uint64) *partModel {
	m := &partModel{t: t, rng: rand.New(rand.NewPCG(seed, 11)), max: 2 + int(seed%9), prior: map[int64]bool{}}
	m.p = newPartition(context.Background(), partKey{"t", 0}, 1, m.max, func(p *partition) { m.applied = !m.applied })
	m.start = int64(m.rng.IntN(50))
	m.next, m.newest = m.start, -1
	var rs []offRange
	for o := m.start + 1; o < m.start+20; o += 1 + int64(m.rng.IntN(4)) {
		rs = append(rs, offRange{o, o})
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

func (m *partModel) fetch() {
	n := 1 + m.rng.IntN(m.max)
	if !m.fenced && m.rng.IntN(40) == 0 && m.newest > m.start+1 { // an unclean leader election reuses offsets
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
	drop := make([]bool, n)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "t", Offset: m.next})
		drop[i] = m.rng.IntN(8) == 0
		m.next += 1 + int64(m.rng.IntN(2))
	}
	var ws []*work
	m.p.admit(recs, m.next, drop, func(i int, seq uint64) { ws = append(ws, &work{rec: recs[i], seq: seq}) })
	m.logf("fetch %d..%d fenced=%v -> %d to lanes", recs[0].Offset, recs[n-1].Offset, m.fenced, len(ws))
	if m.fenced {
		if len(ws) != 0 {
			m.fail("a fenced partition admitted %d records", len(ws))
		}
		m.next = recs[0].Offset
		return
	}
	wi := 0
	for i, r := range recs {
		mr := &modelRec{offset: r.Offset, state: mNone, session: m.rng.IntN(3)}
		prior := m.prior[r.Offset]
		delete(m.prior, r.Offset)
		switch {
		case prior || drop[i]:
			mr.done = true
		default:
			if wi >= len(ws) || ws[wi].rec != r {
				m.fail("record %d not handed to a lane", r.Offset)
			}
			mr.seq, mr.state = ws[wi].seq, mQueued
			wi++
		}
		m.recs = append(m.recs, mr)
		m.newest = r.Offset + 1
	}
	if wi != len(ws) {
		m.fail("%d records handed to lanes, want %d", len(ws), wi)
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
	case op < 93:
		m.p.stopStarting()
		m.fenced = true
		m.logf("fence")
	case op < 94:
		m.p.release()
		m.fenced, m.release = true, true
		m.logf("release")
	}
}

// watermark is the model's: the lowest offset fetched and not done, or
// the next offset to fetch.
func (m *partModel) watermark() int64 {
	for _, r := range m.recs {
		if !r.done && !r.gone {
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
	held := 0
	for i, r := range m.recs {
		if !r.done {
			held = len(m.recs) - i
			break
		}
	}
	if wm := m.watermark(); p.tr.watermark() != wm {
		m.fail("watermark %d, model %d", p.tr.watermark(), wm)
	}
	if p.tr.pending() != held {
		m.fail("held %d, model %d", p.tr.pending(), held)
	}
	if p.paused && held <= m.max/2 || !p.paused && held >= m.max {
		m.fail("paused %v with %d held (bound %d)", p.paused, held, m.max)
	}
	if m.applied != p.paused {
		m.fail("flow told paused=%v, partition wants %v: a flip was not notified", m.applied, p.paused)
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

func TestPartitionModel(t *testing.T) {
	seeds, steps := 400, 400
	if testing.Short() {
		seeds = 50
	}
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
