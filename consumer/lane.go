package consumer

import (
	"context"
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
	// parkRetry marks a retry of the lane's parked head (park_lane.go),
	// queued by the park loop; rec is nil then.
	parkRetry bool

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
// workers waiting for a lane, the count of lanes alive, and the wait group
// the workers are in (the consumer waits on it after stop).
type laneSet struct {
	process func(*lane, *work)
	// batch, when set (NewBatch), handles up to maxBatch records at a time
	// in place of process.
	batch    func(*lane, []*work)
	maxBatch int
	alive    atomic.Int64
	wg       sync.WaitGroup

	mu       sync.Mutex
	parked   []*worker // waiting for a lane; the most recent last
	stopping bool      // set by stop: workers end instead of parking
}

// worker is a goroutine that drains lanes. Between lanes it parks: it
// waits on its channel for the next lane, or nil to end.
type worker struct {
	next  chan *lane // cap 1
	since time.Time  // when it parked
}

// workerLinger is how long a parked worker waits for a lane before it
// ends. Reusing a worker saves a goroutine start and the growth of a fresh
// stack to the handler path's depth, the main cost of a session with only a
// message or two; a parked worker belongs to no session, and all of them
// are gone shortly after the last record (see retire).
const workerLinger = 100 * time.Millisecond

func newLaneSet(process func(*lane, *work)) *laneSet {
	return &laneSet{process: process}
}

// start gives a new lane to the most recently parked worker, or to a new
// one.
//
// No lane may start after stop (the poll loop, the only caller, has ended
// by then): such a lane would run after the shutdown released its
// partition. start then refuses it, with false.
func (set *laneSet) start(l *lane) bool {
	set.mu.Lock()
	if set.stopping {
		set.mu.Unlock()
		return false
	}
	if n := len(set.parked); n > 0 {
		w := set.parked[n-1]
		set.parked[n-1] = nil
		set.parked = set.parked[:n-1]
		set.mu.Unlock()
		w.next <- l // out of parked: ours is its only send
		return true
	}
	set.wg.Add(1) // under mu: never concurrent with stop's Wait
	set.mu.Unlock()
	go set.work(&worker{next: make(chan *lane, 1)}, l)
	return true
}

// work is a worker goroutine: it drains its lane in order, parks until it
// gets another lane, and ends when it gets nil.
func (set *laneSet) work(w *worker, l *lane) {
	defer set.wg.Done()
	for l != nil {
		if set.batch != nil {
			for ws := l.s.nextN(l, set.maxBatch); len(ws) > 0; ws = l.s.nextN(l, set.maxBatch) {
				set.batch(l, ws)
			}
		} else {
			for r := l.s.next(l); r != nil; r = l.s.next(l) {
				set.process(l, r)
			}
		}
		set.mu.Lock()
		if set.stopping {
			set.mu.Unlock()
			return
		}
		w.since = time.Now()
		set.parked = append(set.parked, w)
		set.mu.Unlock()
		l = <-w.next
	}
}

// stop ends the parked workers, and every other one once its lane ended;
// wg then waits for them. No lane may start afterwards.
func (set *laneSet) stop() {
	set.mu.Lock()
	set.stopping = true
	set.mu.Unlock()
	set.retire(0)
}

// retire ends the workers parked for longer than linger (all of them with
// 0). Called every workerLinger by retireLoop, and with 0 by stop.
//
// The workers to end are taken out of parked under the lock and told after
// it (each is then out of reach of start): after a burst of a million
// lanes, waking them all under the lock would hold up every lane start and
// every parking worker for over a second.
func (set *laneSet) retire(linger time.Duration) {
	set.mu.Lock()
	now := time.Now()
	i := 0 // parked is in parking order: the oldest first
	for i < len(set.parked) && now.Sub(set.parked[i].since) >= linger {
		i++
	}
	gone := make([]*worker, i)
	copy(gone, set.parked[:i])
	n := copy(set.parked, set.parked[i:])
	clear(set.parked[n:])
	set.parked = set.parked[:n]
	if cap(set.parked) > 64 && n < cap(set.parked)/4 {
		set.parked = append([]*worker(nil), set.parked...) // let a burst's array go
	}
	set.mu.Unlock()
	for _, w := range gone {
		w.next <- nil
	}
}

// retireLoop retires lingering workers until ctx ends. It ticks at half
// the linger, so a worker waits 100 to 150 ms for a lane.
func (set *laneSet) retireLoop(ctx context.Context) {
	t := time.NewTicker(workerLinger / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			set.retire(workerLinger)
		}
	}
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
// session has none.
func (s *shard) enqueue(w *work) {
	s.mu.Lock()
	if l := s.lanes[w.lane]; l != nil {
		l.queue = append(l.queue, w)
		s.mu.Unlock()
		return
	}
	key := strings.Clone(w.lane) // w.lane may point into a fetch buffer
	l := &lane{key: key, s: s, queue: []*work{w}}
	s.lanes[key] = l
	s.lanesOf.alive.Add(1)
	s.mu.Unlock()
	if !s.lanesOf.start(l) { // after the shutdown: the next owner reads the record
		s.mu.Lock()
		delete(s.lanes, key)
		s.lanesOf.alive.Add(-1)
		s.mu.Unlock()
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
