package consumer

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The lanes: the shards (the session → lane map, striped), a lane (one
// session's queue, drained one record at a time) and the workers that run
// lanes from the run queue. A record reaches its lane in dispatch.go and
// is handled in deliver.go.

// laneSet is what the shards share: how a lane handles a record, the run
// queue of lanes waiting for a worker, the workers, the count of lanes
// alive, and the wait group the workers are in (the consumer waits on it
// after stop).
//
// Workers take lanes from the run queue, oldest first, and drain each in
// order. A new lane is queued, not handed to a goroutine of its own: a
// worker about to finish its lane takes it next, and only when every
// running worker is inside a record (a handler, its retries or its DLQ
// write) is another worker woken, or started. So a lane never waits for
// another lane's handler, however long that one blocks (with every handler
// blocked, each lane gets its own worker), while a burst of short-lived
// lanes is run by a few workers instead of a goroutine woken per lane.
//
// avail counts the workers that are running and not inside a record: they
// will look at the run queue before they park. A lane is queued and avail
// read in one order, a worker entering a record decrements avail and reads
// the queue's length in the other, so at least one of them sees the other
// and wakes a worker: no lane waits with every worker inside a record.
type laneSet struct {
	process func(*lane, *work) bool // true: the record went back to its lane (Consumer.giveBack)
	// admit, when set (per-session control, control.go), decides under
	// the shard's lock whether a lane's head may be taken now; when not,
	// the lane sleeps (lane.asleep) and its wake starts it again.
	admit func(*lane, *work) bool
	// joins, when set (per-session control), says whether a record rides
	// in the batch whose head admit let go (nextN): the head's admission
	// covers it. A batch ends before the first record it does not cover.
	joins func(head, w *work) bool
	// batch, when set (NewBatch), handles up to maxBatch records at a time
	// in place of process.
	batch    func(*lane, []*work) bool
	maxBatch int
	alive    atomic.Int64
	wg       sync.WaitGroup

	avail   atomic.Int64 // running workers not inside a record
	workers atomic.Int64 // worker goroutines alive, parked ones included
	waiting atomic.Int64 // len(runq), readable without mu

	mu       sync.Mutex
	runq     []*lane   // lanes waiting for a worker, oldest first
	parked   []*worker // idle workers; the most recent last
	stopping bool      // set by stop: workers end once the run queue is empty
}

// worker is a goroutine that drains lanes. With nothing to run it parks: it
// waits on its channel to look at the run queue again (true) or to end
// (false).
type worker struct {
	wake  chan bool // cap 1
	since time.Time // when it parked
}

// wakeBurst bounds the workers one blocked entry into a record wakes.
var wakeBurst = int64(4 * runtime.GOMAXPROCS(0))

func newLaneSet(process func(*lane, *work) bool) *laneSet {
	return &laneSet{process: process}
}

// startAll queues new lanes for workers, waking workers while fewer are
// available than lanes wait (up to GOMAXPROCS of them).
//
// No lane may start after stop (the poll loop has ended by then): such a
// lane would run after the shutdown released its partition. startAll then
// refuses the lanes: it drops them from their shards (the next owner reads
// their records).
func (set *laneSet) startAll(ls []*lane) {
	set.mu.Lock()
	if set.stopping {
		set.mu.Unlock()
		for _, l := range ls {
			l.s.drop(l)
		}
		return
	}
	set.runq = append(set.runq, ls...)
	n := set.waiting.Add(int64(len(ls)))
	if want := min(n, int64(runtime.GOMAXPROCS(0))) - set.avail.Load(); want > 0 {
		set.wakeLocked(want)
	}
	set.mu.Unlock()
}

// wakeLocked makes n more workers available: parked ones first, then new
// ones. set.mu held.
func (set *laneSet) wakeLocked(n int64) {
	for ; n > 0; n-- {
		set.avail.Add(1)
		if k := len(set.parked); k > 0 {
			w := set.parked[k-1]
			set.parked[k-1] = nil
			set.parked = set.parked[:k-1]
			w.wake <- true // out of parked: ours is its only send
			continue
		}
		set.wg.Add(1) // under mu: never concurrent with stop's Wait
		set.workers.Add(1)
		go set.work(&worker{wake: make(chan bool, 1)})
	}
}

// enter and leave bracket a record: a worker inside one is not available.
// The last available worker entering a record wakes workers for the lanes
// waiting.
func (set *laneSet) enter() {
	if set.avail.Add(-1) > 0 || set.waiting.Load() == 0 {
		return
	}
	set.mu.Lock()
	if w := int64(len(set.runq)); w > 0 && set.avail.Load() == 0 {
		set.wakeLocked(min(w, wakeBurst))
	}
	set.mu.Unlock()
}

func (set *laneSet) leave() { set.avail.Add(1) }

// work is a worker goroutine: it runs lanes from the run queue, parks when
// there is none, and ends when told to (or, stopping, when none is left).
func (set *laneSet) work(w *worker) {
	defer set.wg.Done()
	defer set.workers.Add(-1)
	for {
		l, ok := set.take(w)
		if !ok {
			return
		}
		if l == nil {
			if !<-w.wake {
				return
			}
			continue
		}
		set.drain(l)
	}
}

// take pops the oldest waiting lane. With none it parks w (it returns nil,
// true: wait to be woken) or, stopping, ends it (false).
func (set *laneSet) take(w *worker) (*lane, bool) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if len(set.runq) > 0 {
		l := set.runq[0]
		set.runq[0] = nil
		set.runq = set.runq[1:]
		if len(set.runq) == 0 {
			set.runq = nil // let a burst's array go
		}
		set.waiting.Add(-1)
		return l, true
	}
	set.avail.Add(-1)
	if set.stopping {
		return nil, false
	}
	w.since = time.Now()
	set.parked = append(set.parked, w)
	return nil, true
}

// drain runs l's records in order until its queue is empty and it ends.
func (set *laneSet) drain(l *lane) {
	if set.batch != nil {
		for ws := l.s.nextN(l, set.maxBatch); len(ws) > 0; ws = l.s.nextN(l, set.maxBatch) {
			set.enter()
			set.batch(l, ws)
			set.leave()
		}
		return
	}
	for r := l.s.next(l); r != nil; r = l.s.next(l) {
		set.enter()
		set.process(l, r)
		set.leave()
	}
}

// wake starts l again after its sleep number seq, unless it was woken
// since (a wake of an earlier sleep does nothing: a lane is never queued
// twice).
func (set *laneSet) wake(l *lane, seq uint64) {
	s := l.s
	s.mu.Lock()
	if l.asleep == awake || l.sleeps != seq {
		s.mu.Unlock()
		return
	}
	l.asleep = awake
	s.mu.Unlock()
	set.startAll([]*lane{l})
}

// shard is one stripe of the session → lane map. A record's shard is
// Consumer.shardOf its lane, so one session always lands on one shard and
// sessions spread evenly over shards regardless of their partition.
type shard struct {
	lanesOf *laneSet // what every shard shares
	mu      sync.Mutex
	lanes   map[string]*lane
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
	if s.lanesOf.admit != nil && !s.lanesOf.admit(l, w) {
		return nil // asleep: it stays in the map with its records
	}
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
	if s.lanesOf.admit != nil && !s.lanesOf.admit(l, l.queue[0]) {
		return nil // asleep, as in next: a rate counts a batch as its head
	}
	// One partition per batch: the head's fence then covers every record
	// of it, so a revoke stops the whole batch and its drain never waits on
	// a record waiting behind another partition's head. With control on,
	// the head's admission must cover each record too (joins): a paused
	// session's record never rides in another session's batch.
	n, head := 1, l.queue[0]
	for n < min(len(l.queue), max) && l.queue[n].p == head.p && (s.lanesOf.joins == nil || s.lanesOf.joins(head, l.queue[n])) {
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
	// During a wait of its record as a moved session (growth_loop.go):
	// the count the record is stamped with, its partition, and a wake for
	// an older record of the session arriving from another partition.
	// Guarded by s.mu.
	waitLevel int
	waitPart  *partition
	older     chan struct{}
	// asleep says why the lane waits without a worker (control.go):
	// its session paused or held by a rate; sleeps counts its sleeps, so
	// that only the wake of the last one starts it. Guarded by s.mu.
	asleep  sleepKind
	sleeps  uint64
	sleptOn *work     // the head it sleeps on
	sleptAt time.Time // when it began to sleep

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

// sleepKind says why a lane sleeps (laneSet.admit said no: control.go).
type sleepKind uint8

const (
	awake sleepKind = iota
	sleepPaused
	sleepRated
)

func (k sleepKind) String() string {
	switch k {
	case sleepPaused:
		return "paused"
	case sleepRated:
		return "throttled"
	}
	return ""
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
