package consumer

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

	// claim is held by whoever finishes the record, its lane or the stall
	// skipper, while deciding and writing its outcome: one outcome, one
	// dead-letter copy.
	claim sync.Mutex
}

// shard is one stripe of the session → lane map. A record's shard is
// Jump(Sum64(lane), Shards), so one session always lands on one shard and
// sessions spread evenly over shards regardless of their partition.
type shard struct {
	lanesOf *laneSet // what every shard shares
	mu      sync.Mutex
	lanes   map[string]*lane
}

// laneSet is what the shards share: how a lane handles a record, the
// workers waiting for a lane (handoff), the count of lanes alive, and the
// wait group the workers are in (the consumer waits on it after closing
// stop).
type laneSet struct {
	process func(*lane, *work)
	handoff chan *lane    // unbuffered: a send succeeds only to a waiting worker
	stop    chan struct{} // closed at shutdown: waiting workers end
	alive   atomic.Int64
	wg      sync.WaitGroup
}

// workerLinger is how long a worker whose lane ended waits for another
// lane before it ends. Reusing a worker saves a goroutine start and the
// growth of a fresh stack to the handler path's depth, the main cost of a
// session with only a message or two; a waiting worker belongs to no
// session, and all of them are gone this long after the last record.
const workerLinger = 100 * time.Millisecond

func newLaneSet(process func(*lane, *work)) *laneSet {
	return &laneSet{process: process, handoff: make(chan *lane), stop: make(chan struct{})}
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

	// The attempt under way, for the watchdog: since is its start in Unix
	// nanoseconds, 0 when the lane is between attempts.
	since    atomic.Int64
	cur      atomic.Pointer[work]
	attempt  atomic.Int32
	reported atomic.Bool
	span     atomic.Pointer[spanRef] // the attempt's span, when recording
}

// spanRef boxes a span for an atomic pointer.
type spanRef struct{ trace.Span }

func (l *lane) begin(w *work, attempt int, now time.Time, span trace.Span) {
	if span.IsRecording() {
		l.span.Store(&spanRef{span})
	} else if l.span.Load() != nil {
		l.span.Store(nil)
	}
	l.cur.Store(w)
	l.attempt.Store(int32(attempt))
	l.reported.Store(false)
	l.since.Store(now.UnixNano())
}

func (l *lane) end() { l.since.Store(0) }

// enqueue appends w to its session's lane, starting the lane when the
// session has none: handed to a waiting worker, or to a new one.
func (s *shard) enqueue(w *work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lanes[w.lane]; l != nil {
		l.queue = append(l.queue, w)
		return
	}
	key := strings.Clone(w.lane) // w.lane may point into a fetch buffer
	l := &lane{key: key, s: s, queue: []*work{w}}
	s.lanes[key] = l
	set := s.lanesOf
	set.alive.Add(1)
	select {
	case set.handoff <- l: // the worker takes s.mu in next, after we return
	default:
		set.wg.Add(1)
		go set.work(l)
	}
}

// next pops the lane's next record. With the queue empty it ends the lane:
// it leaves the map and next returns nil.
func (s *shard) next(l *lane) *work {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(l.queue) == 0 {
		delete(s.lanes, l.key)
		s.lanesOf.alive.Add(-1)
		return nil
	}
	w := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = nil // let a grown backing array go
	}
	return w
}

// work is a worker goroutine: it drains its lane in order, then waits up
// to workerLinger for another lane, and ends.
func (set *laneSet) work(l *lane) {
	defer set.wg.Done()
	linger := time.NewTimer(workerLinger)
	defer linger.Stop()
	for {
		for w := l.s.next(l); w != nil; w = l.s.next(l) {
			set.process(l, w)
		}
		linger.Reset(workerLinger)
		select {
		case l = <-set.handoff:
		case <-linger.C:
			return
		case <-set.stop:
			return
		}
	}
}
