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

// laneSet is what the shards share: how a lane handles a record, how long
// an idle lane lives, the stop signal, the count of lanes alive, and the
// wait group their goroutines are in (the consumer waits on it).
type laneSet struct {
	process func(*lane, *work)
	idle    time.Duration
	stop    <-chan struct{}
	alive   atomic.Int64
	wg      sync.WaitGroup
}

// lane is one active session: its queue, and the goroutine that drains it
// one record at a time.
type lane struct {
	key   string
	queue []*work       // guarded by shard.mu
	wake  chan struct{} // cap 1

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

// enqueue appends w to its lane, starting the lane's goroutine when the
// session has none.
func (s *shard) enqueue(w *work) {
	s.mu.Lock()
	l := s.lanes[w.lane]
	if l == nil {
		key := strings.Clone(w.lane) // w.lane may point into a fetch buffer
		l = &lane{key: key, wake: make(chan struct{}, 1)}
		s.lanes[key] = l
		s.lanesOf.alive.Add(1)
		s.lanesOf.wg.Add(1)
		go s.run(l)
	}
	l.queue = append(l.queue, w)
	s.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// next pops the lane's next record, or returns nil when its queue is empty.
func (s *shard) next(l *lane) *work {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(l.queue) == 0 {
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

// retire removes an idle lane; it fails if work arrived meanwhile.
func (s *shard) retire(l *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(l.queue) > 0 {
		return false
	}
	delete(s.lanes, l.key)
	s.lanesOf.alive.Add(-1)
	return true
}

// run is the lane's goroutine: it handles queued records in order and ends
// after SessionIdle with nothing to do, or when the consumer stops.
func (s *shard) run(l *lane) {
	set := s.lanesOf
	defer set.wg.Done()
	idle := time.NewTimer(set.idle)
	defer idle.Stop()
	for {
		if w := s.next(l); w != nil {
			set.process(l, w)
			continue
		}
		idle.Reset(set.idle)
		select {
		case <-l.wake:
		case <-idle.C:
			if s.retire(l) {
				return
			}
		case <-set.stop:
			s.mu.Lock()
			delete(s.lanes, l.key)
			set.alive.Add(-1)
			s.mu.Unlock()
			return
		}
	}
}
