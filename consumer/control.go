package consumer

import (
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"
)

// Per-session control at the lanes
// (https://github.com/lanesdev/lanes/blob/main/docs/control.md): before a
// lane's head is taken, the control gate (internal/control) says whether it
// may start. A paused session's lane, or one a rate holds, sleeps: it stays
// in its shard with its records, holds no worker, and is started again by
// its wake (the session resumed, or its alarm). With parking on, a paused
// session's records are parked instead (process), so its partition moves
// on; its parked retries wait while it is paused (park_loop.go).

// controlKey is the control gate's key of w's session: its lane for a
// parked retry, which carries no record.
func controlKey(w *work) control.Key {
	s := w.session
	if w.parkRetry {
		s = w.lane
	}
	return control.Key{Topic: w.p.key.topic, Session: s}
}

// admitLane decides, under l's shard lock, whether l's head w may be taken
// now; when not, l sleeps and its wake is left with the gate (paused) or
// the alarms (a rate).
func (c *Consumer) admitLane(l *lane, w *work) bool {
	if h := l.sleptOn; h != nil { // it slept on h until now
		h.p.sleep(h.seq, false)
		c.ctl.Forget(controlKey(h), l) // a wake left behind (its partition fenced meanwhile), if any
		l.sleptOn = nil
		if time.Since(l.sleptAt) > c.cfg.StallTimeout/4 {
			restartStalls(l.queue) // its records held their partitions at an operator's word
		}
	}
	l.asleep = awake
	select {
	case <-w.p.fence:
		return true // it drops out at its start
	default:
	}
	k := controlKey(w)
	if c.ctl.Free(k, w.resource, &w.ticket) {
		return true // the common case: the session is not controlled, no limit applies
	}
	if c.parksPaused(w) && c.ctl.Paused(k) {
		return true // parked by process, or its parked retry waits (retryParked)
	}
	l.sleeps++
	seq := l.sleeps
	wake := func() { c.lanes.wake(l, seq) }
	v := c.ctl.Admit(k, w.resource, &w.ticket, time.Now(), l, wake)
	switch {
	case v.Go:
		return true
	case v.Paused:
		l.asleep = sleepPaused
	default:
		l.asleep = sleepRated
		c.alarms.At(v.Until, wake)
	}
	l.sleptOn, l.sleptAt = w, time.Now()
	w.p.sleep(w.seq, true)
	return false
}

// joinsBatch reports whether w rides in the batch (NewBatch) whose head,
// head, admitLane just let go: the head's admission covers w when w uses
// the head's resource (the batch's attempt takes one slot of it, and a
// rate counts the batch as its head) and is of the head's session, or of
// a session that nothing can hold (control.Gate.Free). A lane shared by
// sessions (OrderPartition, OrderNone) so never hands a paused or limited
// session's record to another session's batch: its batch ends there, and
// that record is its next batch's head, admitted on its own.
func (c *Consumer) joinsBatch(head, w *work) bool {
	if w.resource != head.resource {
		return false
	}
	return w.session == head.session || c.ctl.Free(controlKey(w), "", &w.ticket)
}

// restartStalls has the partitions of the records ws start their stall
// clocks again at their next check: the records waited in a sleeping lane,
// and each has its whole StallTimeout from now on.
func restartStalls(ws []*work) {
	var last *partition
	for _, w := range ws {
		if w.p != last {
			w.p.stallAgain.Store(true)
			last = w.p
		}
	}
}

// parksPaused reports whether a paused session's record w is parked
// rather than left waiting in its lane: with parking on, in a lane of its
// session's own (OrderSession). A lane shared by sessions (OrderPartition)
// or of one record (OrderNone) is parked and retried by its lane's key,
// which names no session: its paused records wait in their lanes.
func (c *Consumer) parksPaused(w *work) bool {
	return c.park != nil && (w.parkRetry || w.lane == w.session)
}

// freeNow reports whether the control gate has nothing to say of w (no
// setting of its session, no limit, no token taken: control.Gate.Free),
// always without control: it may run without the lane's admission.
func (c *Consumer) freeNow(w *work) bool {
	return c.ctl == nil || c.ctl.Free(controlKey(w), w.resource, &w.ticket)
}

// giveBack returns ws[0], a record of lane l started and then given back
// by its wait as a moved session (waitMoved, or the gate asked again once
// it was released), to l's queue with the records of its batch behind it
// (shard.giveBack): the lane's admission decides on it again, so a
// session paused or limited while it waited sleeps, with no worker, and
// its order kept. The record is queued again in its partition.
//
// A record given back by its wait (moves still set: it waits again when
// it is taken again) still waits as a moved session, behind its older
// record: its partition stays excused from the stall watch, as in the
// wait (movedWaiting), until its lane takes it again (retaken), however
// long that older record's handler runs. One the gate is to ask again
// once released waits no more: its partition is watched.
func (c *Consumer) giveBack(l *lane, ws []*work) {
	w := ws[0]
	if w.moves {
		w.p.movedWaiting(w.seq, true)
		w.movedBack = true
	}
	w.p.unstart()
	l.s.giveBack(l, ws)
}

// retaken ends the excuse giveBack left for w when its lane takes it
// again: its wait, if it still has one, marks it again (waitMoved), and
// one that ended meanwhile, or a record that drops out at its start (its
// partition fenced), is watched again.
func (c *Consumer) retaken(w *work) {
	if w.movedBack {
		w.movedBack = false
		w.p.movedWaiting(w.seq, false)
	}
}

// pausedNow reports whether w's session is paused (false without control).
func (c *Consumer) pausedNow(w *work) bool {
	return c.ctl != nil && c.ctl.Paused(controlKey(w))
}

// parkPaused parks w, whose session is paused, so that its partition
// moves on; its later records follow it (forwardParked) and its retry
// waits until it is resumed. It reports whether the record is done here.
func (c *Consumer) parkPaused(w *work) bool {
	now := time.Now()
	c.stats.pausedParked.Add(1)
	return c.parkOut(w, nil, 0, now, now, "paused: its session was paused by an operator (lanes session resume)")
}

// wakeFenced wakes the sleeping lanes whose head belongs to a fenced
// partition: its records drop out (the next owner reads them), instead of
// waiting in memory for the session's resume.
func (c *Consumer) wakeFenced() {
	var ls []*lane
	var seqs []uint64
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			if l.asleep == awake || len(l.queue) == 0 {
				continue
			}
			select {
			case <-l.queue[0].p.fence:
				ls, seqs = append(ls, l), append(seqs, l.sleeps)
			default:
			}
		}
		s.mu.Unlock()
	}
	for i, l := range ls {
		c.lanes.wake(l, seqs[i])
	}
}

// resumed acts on sessions resumed: their waiting lanes wake, and, with
// parking on, their parked heads are due at once.
func (c *Consumer) resumed(wakes []func(), keys []control.Key) {
	for _, w := range wakes {
		w()
	}
	if c.park == nil {
		return
	}
	now := time.Now()
	for _, k := range keys {
		for _, p := range c.own.all() {
			if p.key.topic == k.Topic {
				p.parkHurry(k.Session, now)
			}
		}
	}
}

// asleepCounts is how many lanes sleep, paused and held by a rate.
func (c *Consumer) asleepCounts() (paused, rated int) {
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			switch l.asleep {
			case sleepPaused:
				paused++
			case sleepRated:
				rated++
			}
		}
		s.mu.Unlock()
	}
	return paused, rated
}
