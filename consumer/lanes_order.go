package consumer

import (
	"slices"
	"strings"
)

// A lane's order when a topic grows: a session's records from two
// partitions reach its lane in the order their partitions were read, not
// the order they were written. A record stamped with an older partition
// count (hashring.HeaderPlacement) was written before one of the same
// topic stamped with a newer count, so it goes ahead of those of the
// topic's other partitions in the queue (passing over another topic's
// records, whose counts say nothing of this topic's);
// and a record waiting as a moved session (growth_loop.go) runs the older
// records of its session that arrive meanwhile before it goes on waiting,
// or it would wait for them for ever behind itself (with control on, it
// is given back to its lane instead when the gate may hold them).

// insertLocked queues w in its lane: at the end, or ahead of the records
// of its topic's other partitions stamped with a newer count, and wakes a wait of the
// lane's record that w is older than. s.mu held.
func (l *lane) insertLocked(w *work) {
	i := len(l.queue)
	if c := w.placed.Count; c > 0 {
		for k := len(l.queue) - 1; k >= 0; k-- {
			x := l.queue[k]
			if x.p.key.topic != w.p.key.topic {
				continue // another topic's: passed over
			}
			if x.p == w.p || x.placed.Count <= c {
				break // its own partition's, or not newer: w comes after it
			}
			i = k // a newer record of another partition of the topic: w goes ahead of it
		}
	}
	if i == len(l.queue) {
		l.queue = append(l.queue, w)
	} else {
		l.queue = slices.Insert(l.queue, i, w)
	}
	if l.olderThanWait(w) {
		select {
		case l.older <- struct{}{}:
		default:
		}
	}
}

// olderThanWait reports whether w, of l's session, was written before the
// record l waits with as a moved session: of another partition of its
// topic, stamped with an older count or not at all. s.mu held.
func (l *lane) olderThanWait(w *work) bool {
	return l.waitLevel > 0 && olderThan(w, l.waitPart, l.waitLevel)
}

// olderThan reports whether x was written before a record of its session
// on partition p stamped with count level (olderThanWait's rule).
func olderThan(x *work, p *partition, level int) bool {
	return x.p != p && x.p.key.topic == p.key.topic && x.placed.Count < level
}

// setWait marks l's record w as waiting (level: its stamp's count; 0:
// the wait is over) and returns the channel that wakes it when an older
// record of the session arrives.
func (s *shard) setWait(l *lane, w *work, level int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.waitLevel, l.waitPart, l.took = level, w.p, w
	if level == 0 {
		l.waitPart = nil
		return nil
	}
	if l.older == nil {
		l.older = make(chan struct{}, 1)
	}
	return l.older
}

// takeOlder takes off l's queue the first record older than the one l
// waits with, or returns nil. free (nil: always) says whether the control
// gate has nothing to say of a record (Consumer.freeNow): one it may hold
// is not taken, as the lane's admission never ran for it; held reports it,
// and the waiting record is then given back (giveBack) for the admission
// to decide on the older one first.
func (s *shard) takeOlder(l *lane, free func(*work) bool) (x *work, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range l.queue {
		if l.olderThanWait(x) {
			if free != nil && !free(x) {
				return nil, true
			}
			l.queue = slices.Delete(l.queue, i, i+1)
			l.took = x
			return x, false
		}
	}
	return nil, false
}

// giveBack puts ws back in l's queue: ws[0] is a record its lane started
// and gave back during, or right after, its wait as a moved session (the
// control gate may hold its session), and the rest are the records of its
// batch behind it (NewBatch), not started. They go ahead of the queue but
// behind the records of the session older than ws[0] that wait there (one
// of them may be why): the lane's admission (laneSet.admit) then decides
// on its new head as on any other, and the lane sleeps without a worker
// when the gate holds it. The lane no longer works on a record (took):
// the stall watch finds them queued, in a lane that sleeps or runs (ws[0]
// excused while it still waits as moved: Consumer.giveBack).
func (s *shard) giveBack(l *lane, ws []*work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := ws[0]
	q := make([]*work, 0, len(l.queue)+len(ws))
	for _, x := range l.queue {
		if olderThan(x, w.p, w.placed.Count) {
			q = append(q, x)
		}
	}
	q = append(q, ws...)
	for _, x := range l.queue {
		if !olderThan(x, w.p, w.placed.Count) {
			q = append(q, x)
		}
	}
	l.queue, l.took = q, nil
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
		l.insertLocked(w)
		return nil
	}
	key := strings.Clone(w.lane) // w.lane may point into a fetch buffer
	l := &lane{key: key, s: s, queue: []*work{w}}
	s.lanes[key] = l
	s.lanesOf.alive.Add(1)
	return l
}
