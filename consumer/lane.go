package consumer

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// work is one record on its way through a lane.
type work struct {
	rec     *kgo.Record
	p       *partition
	seq     uint64
	session string
	lane    string
	msg     Message    // handed to the handler; part of work to save an allocation
	first   attemptCtx // the first attempt's context, likewise
	// parkRetry marks a retry of the lane's parked head (park_lane.go),
	// queued by the park loop; rec is nil then.
	parkRetry bool

	// claim is held by whoever finishes the record, its lane or the stall
	// skipper, while deciding and writing its outcome: one outcome, one
	// dead-letter copy.
	claim sync.Mutex
}

// shard is one stripe of the session → lane map. A record's shard is
// Consumer.shardOf its lane, so one session always lands on one shard and
// sessions spread evenly over shards regardless of their partition.
type shard struct {
	lanesOf *laneSet // what every shard shares
	mu      sync.Mutex
	lanes   map[string]*lane
}

// lane is one session with work: its queue, drained one record at a time
// by one worker goroutine. A lane exists only while it has work: it leaves
// its shard's map when its queue is empty after a record, and the
// session's next record starts a new lane. So a session costs nothing
// between messages, and the workers follow the sessions with work, whatever
// their number and however long a handler blocks: a new lane goes to a
// worker waiting for one, or to a new worker. One session never has two
// lanes: the old one leaves the map, under the shard's lock, only after its
// last record was handled.
type lane struct {
	key   string
	s     *shard
	queue []*work // guarded by s.mu
	// held is the batch under way (NewBatch), taken off queue by nextN;
	// guarded by s.mu, so that the stall watch finds its records.
	held []*work
	// took is the record next last took off queue: the one the lane works
	// on, from before its first attempt (a wait for the breaker or a
	// silence hold) through its retries to its dead-letter or park write;
	// guarded by s.mu, so that the stall watch and Stats find it in every
	// one of those states. It stays set until the next take (a finished
	// record is done, so it holds no watermark).
	took *work

	// The attempt under way, for the watchdog: since is its start, a clock
	// stamp (clock.go), 0 when the lane is between attempts; begin stores it
	// last, so a reader that finds it unchanged after reading cur and
	// attempt read that attempt's. reported is the since of the attempt
	// the watchdog last reported (it alone writes it).
	since    atomic.Int64
	cur      atomic.Pointer[work]
	attempt  atomic.Int32
	reported atomic.Int64
	span     atomic.Pointer[spanRef]    // the attempt's span, when recording
	actx     atomic.Pointer[attemptCtx] // its context, for a silence hold to cut (silence.go)
}

// spanRef boxes a span for an atomic pointer.
type spanRef struct{ trace.Span }

// begin marks the attempt under way; at is its start, a clock stamp.
func (l *lane) begin(w *work, attempt int, at int64, span trace.Span) {
	if span.IsRecording() {
		l.span.Store(&spanRef{span})
	} else if l.span.Load() != nil {
		l.span.Store(nil)
	}
	l.cur.Store(w)
	// Stores only what changed: an atomic store is a full barrier on most
	// machines, paid per record, and most records are first attempts.
	if a := int32(attempt); l.attempt.Load() != a {
		l.attempt.Store(a)
	}
	l.since.Store(at)
}

func (l *lane) end() {
	l.since.Store(0)
	l.actx.Store(nil)
}

// enqueue appends w to its session's lane, starting the lane when the
// session has none.
func (s *shard) enqueue(w *work) {
	if l := s.add(w); l != nil {
		s.lanesOf.startAll([]*lane{l})
	}
}

// add appends w to its session's lane. When the session has none it makes
// one and returns it, for the caller to start (laneSet.startAll) once the
// rest of the poll is added: a lane starts with every record the poll
// brought it.
func (s *shard) add(w *work) *lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lanes[w.lane]; l != nil {
		l.queue = append(l.queue, w)
		return nil
	}
	key := strings.Clone(w.lane) // w.lane may point into a fetch buffer
	l := &lane{key: key, s: s, queue: []*work{w}}
	s.lanes[key] = l
	s.lanesOf.alive.Add(1)
	return l
}

// drop removes a lane that was never started (refused after the shutdown:
// the next owner reads its records).
func (s *shard) drop(l *lane) {
	s.mu.Lock()
	delete(s.lanes, l.key)
	s.lanesOf.alive.Add(-1)
	s.mu.Unlock()
}

// next pops the lane's next record. With the queue empty it ends the lane:
// it leaves the map and next returns nil.
func (s *shard) next(l *lane) *work {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(l.queue) == 0 {
		delete(s.lanes, l.key)
		s.lanesOf.alive.Add(-1)
		l.took = nil
		return nil
	}
	w := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	l.took = w
	if len(l.queue) == 0 {
		l.queue = nil // let a grown backing array go
	}
	return w
}

// nextN takes up to max of the lane's queued records of one partition,
// never waiting for more, into l.held, which it returns (the caller only reads it). With the
// queue empty it ends the lane, like next, and returns nil.
func (s *shard) nextN(l *lane, max int) []*work {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(l.held)
	l.held = l.held[:0]
	if len(l.queue) == 0 {
		delete(s.lanes, l.key)
		s.lanesOf.alive.Add(-1)
		return nil
	}
	// One partition per batch: the head's fence then covers every record
	// of it, so a revoke stops the whole batch and its drain never waits on
	// a record waiting behind another partition's head.
	n := 1
	for n < min(len(l.queue), max) && l.queue[n].p == l.queue[0].p {
		n++
	}
	l.held = append(l.held, l.queue[:n]...)
	clear(l.queue[:n])
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil
	}
	return l.held
}
