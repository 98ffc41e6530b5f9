package consumer

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// shard is one stripe of the session → lane map. A record's shard is
// Jump(Sum64(lane), Shards), so one session always lands on one shard and
// sessions spread evenly over shards regardless of their partition.
type shard struct {
	c     *Consumer
	mu    sync.Mutex
	lanes map[string]*lane
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
		s.c.stats.lanes.Add(1)
		s.c.lanesWG.Add(1)
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
	s.c.stats.lanes.Add(-1)
	return true
}

// run is the lane's goroutine: it handles queued records in order and ends
// after SessionIdle with nothing to do, or when the consumer stops.
func (s *shard) run(l *lane) {
	defer s.c.lanesWG.Done()
	idle := time.NewTimer(s.c.cfg.SessionIdle)
	defer idle.Stop()
	for {
		if w := s.next(l); w != nil {
			s.c.process(l, w)
			continue
		}
		idle.Reset(s.c.cfg.SessionIdle)
		select {
		case <-l.wake:
		case <-idle.C:
			if s.retire(l) {
				return
			}
		case <-s.c.stop:
			s.mu.Lock()
			delete(s.lanes, l.key)
			s.c.stats.lanes.Add(-1)
			s.mu.Unlock()
			return
		}
	}
}

// process runs one record through the handler (with retries and, when
// needed, the DLQ) and reports the outcome to its partition.
func (c *Consumer) process(l *lane, w *work) {
	if !w.p.start(w.seq) {
		return // fenced (the next owner reads it again), or skipped as stalled
	}
	w.p.finish(w.seq, c.deliver(l, w))
}
