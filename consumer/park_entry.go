package consumer

import "time"

// parkKind tells the entries of a park partition apart (the
// lanes-park-kind header).
type parkKind byte

const (
	parkRecord parkKind = 'r' // a parked copy of a source record
	parkDone   parkKind = 'd' // a session's records through src are done
	parkHold   parkKind = 'h' // a session is held, its records through src done
	parkFence  parkKind = 'f' // a new owner took the partition
	// parkAttempt: a retry of a session's head (its source offset) failed;
	// it carries the head's failed retries so far, so that a rebuild keeps
	// its budget and backoff.
	parkAttempt parkKind = 'a'
)

// parkEntry is one entry of a park partition as the rebuild reads it:
// its kind, its session, its source offset (a copy's own, a marker's
// through) and the epoch of the owner that wrote it.
type parkEntry struct {
	kind    parkKind
	session string
	src     int64
	epoch   int64
	retries int // parkAttempt: failed retries of the head
}

// replay applies the park partition's entry e, at park offset off, read
// by the rebuild in offset order from the committed park position. It
// reports false for an entry written by an owner fenced before it (a
// write that landed after the partition moved on): ignored.
func (ps *parkSet) replay(off int64, e parkEntry, now time.Time) bool {
	ps.end = max(ps.end, off+1)
	if e.kind == parkFence {
		ps.epoch = max(ps.epoch, off)
		return true
	}
	if e.epoch < ps.epoch {
		return false
	}
	ps.epoch = e.epoch
	switch e.kind {
	case parkRecord:
		ps.add(e.session, off, e.src, now)
	case parkDone:
		ps.done(e.session, e.src, off, now)
	case parkHold:
		ps.held(e.session, e.src, off)
	case parkAttempt:
		ps.attempted(e.session, e.src, e.retries, off, now)
	default:
		return false
	}
	return true
}

// begin starts a rebuild at the committed park position pos, committed
// with the committing owner's epoch: a fence marker below pos is not read
// again, so its epoch applies from the start; one at or above it is read.
func (ps *parkSet) begin(pos, epoch int64) {
	ps.end = max(ps.end, pos)
	if epoch < pos {
		ps.epoch = max(ps.epoch, epoch)
	}
}
