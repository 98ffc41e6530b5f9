package consumer

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
	"github.com/lanesdev/lanes/hashring"
)

// The consumer's knowledge of a growth of a consumed topic's partition
// count (the rules: internal/regrow): each topic's history of counts, the
// moved sessions waiting, the floors the group's commits carry for the old
// partitions, and the ends a change settles at. The growth loop
// (growth_loop.go) reads commits and end offsets and releases the waits;
// partitions track their stamped records (growth_partition.go).
//
// Lock order: a partition's mu before growth.mu; growth.mu is never held
// while taking another lock but the Holds' own.

// growth is what the member knows of its topics' partition counts.
type growth struct {
	mu     sync.Mutex
	topics map[string]*topicGrowth
	holds  regrow.Holds
	kick   chan struct{} // a wait began or a change became known: the loop looks now
	// starts are the partitions added to their topic since the group's
	// commits, and where they start (their log's start): the client reads
	// them from there, whatever its reset policy (adjustStarts).
	starts map[regrow.Part]int64
}

// topicGrowth is one topic's part. newest and changing are read on the
// record path without growth.mu.
type topicGrowth struct {
	newest   atomic.Int64
	changing atomic.Bool

	// Guarded by growth.mu.
	hist   regrow.History
	seen   map[int32]growCommit // what the group's last commits read say, per partition
	settle map[int32]int64      // the old partitions' ends measured once Grace passed; nil before
	told   int                  // the newest count whose change was logged
	// from is when the member found the topic made again and started this
	// part afresh (zero: never): a listing or a commit read before it may
	// be of the old topic, and teaches nothing.
	from time.Time
}

func newGrowth() *growth {
	return &growth{topics: map[string]*topicGrowth{}, kick: make(chan struct{}, 1)}
}

// topic returns topic's part, made on first use.
func (g *growth) topic(name string) *topicGrowth {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.topicLocked(name)
}

func (g *growth) topicLocked(name string) *topicGrowth {
	t := g.topics[name]
	if t == nil {
		t = &topicGrowth{}
		g.topics[name] = t
	}
	return t
}

// learn merges counts known since since into topic's history (observe:
// the topic's count from its metadata, which also tells a topic made
// again). It reports the history after, and whether a change became known
// by it.
func (g *growth) learn(topic string, counts []int, since time.Time, observe int, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.learnLocked(g.topicLocked(topic), counts, since, observe, now)
}

// learnLocked is learn for topic part t. g.mu held.
func (g *growth) learnLocked(t *topicGrowth, counts []int, since time.Time, observe int, now time.Time) {
	was, before := t.hist.Changing(), t.hist.Newest()
	t.hist.Learn(counts, since, now)
	if observe > 0 {
		t.hist.Observe(observe, now)
	}
	if t.hist.Newest() != before {
		t.settle = nil // a newer count: its grace starts again
	}
	t.newest.Store(int64(t.hist.Newest()))
	t.changing.Store(t.hist.Changing())
	if !was && t.hist.Changing() {
		g.poke() // a change became known: the loop looks now
	}
}

// recreated starts afresh the growth state of topics, found deleted and
// made again at now (topics_loop.go: once the member's partitions of the
// old topics are fenced and released, before the new ones are assigned):
// the new topic's counts owe nothing to the old one's, which may be more
// (a topic made again with fewer partitions would otherwise keep the old
// count, and a later growth below it would go unnoticed). The old topics'
// waits are dropped, not released (their records end with their fenced
// partitions), and so are the sessions released on their partitions and
// the starts not applied. Partitions of the old topics keep their part,
// which no longer is their topic's.
func (g *growth) recreated(topics []string, now time.Time) {
	for _, topic := range topics {
		g.holds.Gone(topic)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, topic := range topics {
		g.topics[topic] = &topicGrowth{from: now}
		for k := range g.starts {
			if k.Topic == topic {
				delete(g.starts, k)
			}
		}
	}
}

// committedHistory reports whether a commit of the group on topic carried
// a growth history (read at assignment, readCommits).
func (g *growth) committedHistory(topic string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.topics[topic]
	return t != nil && len(t.seen) > 0
}

// history is topic's history now.
func (g *growth) history(topic string) regrow.History {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.topics[topic]; t != nil {
		h := t.hist
		h.Counts = slices.Clone(h.Counts)
		return h
	}
	return regrow.History{}
}

// readCommits takes in the growth sections of the group's commits (every
// partition of the topics this member knows), read at now or later: their
// histories teach it counts, their floors release waits, and a settled
// newest count settles its own change. Those of a topic made again since
// now are left out: they may be the old topic's.
func (g *growth) readCommits(resps kadm.OffsetResponses, now time.Time) (settled []settling) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for topic, parts := range resps {
		t := g.topics[topic]
		if t == nil || now.Before(t.from) {
			continue
		}
		t.seen = map[int32]growCommit{}
		for q, r := range parts {
			if r.Err != nil || r.At < 0 {
				continue
			}
			gc, ok := splitGrowMeta(r.Metadata)
			if !ok {
				continue
			}
			t.seen[q] = gc
			s := settling{topic, gc.hist.Newest()}
			if gc.hist.Settled && s.level == t.hist.Newest() && t.hist.Changing() && !slices.Contains(settled, s) {
				settled = append(settled, s)
			}
			g.learnLocked(t, gc.hist.Counts, gc.hist.Since, 0, now)
		}
	}
	return settled
}

// Floor is the floor of (topic, q) for level as its committer last said
// it: +inf when it settled a change to level or newer (regrow.Olds).
func (g *growth) Floor(topic string, q int32, level int) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.topics[topic]
	if t == nil {
		return 0, false
	}
	gc, ok := t.seen[q]
	switch {
	case !ok:
		return 0, false
	case gc.hist.Settled && gc.hist.Newest() >= level:
		return math.MaxInt64, true
	}
	for i, c := range gc.hist.Counts[1:] {
		if c >= level && i < len(gc.floors) {
			return gc.floors[i], true // the smallest level at or above: its floor is no higher
		}
	}
	return 0, false
}

// Parked reports whether session may be parked on (topic, q) with a
// record placed by a count older than level, as q's committer last said it
// (regrow.Olds): true unless its last commit settled a change to level or
// newer or, during a change it knew level in, did not name the session
// with an older count.
func (g *growth) Parked(topic string, q int32, session string, level int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.topics[topic]
	if t == nil {
		return true
	}
	gc, ok := t.seen[q]
	switch {
	case !ok || gc.hist.Newest() < level:
		return true // it may not know the change
	case gc.hist.Settled:
		return false
	}
	return len(gc.floors) == 0 || gc.parked.has(session, level)
}

// settling is a topic whose change to count level is found over.
type settling struct {
	topic string
	level int
}

// settleTopic ends topic's change to count level, unless a newer count
// is known since (false): its waits are released, and its partitions drop
// their floors.
func (g *growth) settleTopic(topic string, level int) (regrow.History, bool) {
	g.mu.Lock()
	t := g.topicLocked(topic)
	if !t.hist.Changing() || t.hist.Newest() != level {
		g.mu.Unlock()
		return t.hist, false
	}
	t.hist.Settle()
	t.settle = nil
	t.changing.Store(false)
	h := t.hist
	g.mu.Unlock()
	g.holds.Settled(topic)
	return h, true
}

// announce logs each change the member learnt of since it last looked.
func (g *growth) announce(l *zerolog.Logger) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, t := range g.topics {
		if !t.hist.Changing() || t.told == t.hist.Newest() {
			continue
		}
		t.told = t.hist.Newest()
		l.Info().Str("topic", name).Ints("counts", t.hist.Counts).Time("since", t.hist.Since).
			Msg("growth: the topic's partition count changed; a session it moved waits on its new partition until the group has handled its records on the old one (Stats.Growing); docs/operations.md, adding partitions to a live topic")
	}
}

// partGrow is a partition's part in a growth of its topic: the stamps it
// reads, the floors its commits carry during a change (internal/regrow),
// and its records waiting as moved sessions (not stalled meanwhile).
// Guarded by the partition's mu.
type partGrow struct {
	g     *growth
	t     *topicGrowth
	track bool // floors are kept (Growth.Off: not)

	fl        *regrow.Floors // during a change of its topic; nil otherwise
	lastV     []byte         // the last placement header read, and
	lastPl    hashring.Placement
	waiting   map[uint64]struct{} // records (sequence numbers) waiting as moved sessions
	committed string              // the growth section of the last commit
	// fromParked is what the commit the member took the partition over at
	// named parked: its commits say it until its parked set is rebuilt.
	fromParked parkedOld
	fromNewest int  // the newest count that commit knew
	sessions   bool // its topic is ordered by session (Config.Order): parked sessions are named
}

// poke wakes the growth loop.
func (g *growth) poke() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}
