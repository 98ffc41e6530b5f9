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
	// parkRelease: an operator released a held session (ReleaseHeld,
	// lanes park release); the owner picks it up (park_release.go).
	parkRelease parkKind = 'l'
)

// parkEntry is one entry of a park partition as the rebuild reads it:
// its kind, its session, its source offset (a copy's own, a marker's
// through), and who wrote it: the group, the epoch (park offset of its
// writer's fence) and, on a fence, the writer's generation and the source
// topic's ID.
type parkEntry struct {
	kind    parkKind
	session string
	src     int64
	epoch   int64
	retries int    // parkAttempt: failed retries of the head
	group   string // the writer's consumer group; "" when the entry names none
	gen     int32  // parkFence: the owner's group generation (classic) or member epoch (KIP-848); -1 none
	proto   string // parkFence: the group protocol gen is of ("classic", "consumer"); "" unknown
	topicID string // parkFence: the source topic's ID (hex) when known
	reset   bool   // parkFence: its generation starts the comparison again
}

// fenceMark is a fence marker the identity rules accepted: its park offset
// (the epoch its owner's entries carry), its owner's generation and the
// group protocol that generation is of ("" unknown).
type fenceMark struct {
	off   int64
	gen   int32
	proto string
}

// noFence is the fence in force before any.
var noFence = fenceMark{-1, -1, ""}

// parkWriters are the identity rules of one park partition for one group:
// which entries a rebuild takes as its group's own and in force
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#identity). A
// park partition is shared by every group that consumes its source topic
// with parking on, and holds the entries of every owner the source
// partition had, some landing late. Read in offset order from the committed
// park position, an entry counts when:
//
//   - it names this group (an entry of another group, or of none, is
//     never ours);
//   - a fence: its generation is not below the generation in force (a
//     fence of an owner that lost the partition, landing after the new
//     owner's, is late), or it is a reset fence (an owner whose own fence
//     was below one of the other group protocol: the group's protocol
//     switched and its generations started again), and it names the
//     source topic's current incarnation (a fence of a topic since
//     deleted and made again names another ID); it is then in force;
//   - a release: always (an operator wrote it, not an owner; releasing a
//     session that is not held does nothing);
//   - any other entry: it was written under the fence in force (its epoch
//     is that fence's park offset). An entry under an older fence landed
//     after a newer owner took the partition; one under a fence not taken
//     (late, or of another incarnation) was never the owner's.
//
// The commit keeps the fence in force at the committed park position
// (at): a rebuild starts knowing it. With no committed park position
// nothing before the new owner's own fence is the group's (a new group,
// a re-created topic, an offset reset, parking turned on later).
type parkWriters struct {
	group   string
	topicID string      // the source topic's current ID; "" unknown
	fences  []fenceMark // fences taken, in offset order; the last is in force
}

// inForce is the fence in force: {-1, -1} before any.
func (w *parkWriters) inForce() fenceMark {
	if n := len(w.fences); n > 0 {
		return w.fences[n-1]
	}
	return noFence
}

// at is the fence in force at park offset pos: the last taken below it.
func (w *parkWriters) at(pos int64) fenceMark {
	f := noFence
	for _, m := range w.fences {
		if m.off < pos {
			f = m
		}
	}
	return f
}

// forgetBefore drops the fences taken before the one in force at pos: a
// commit at pos no longer needs them.
func (w *parkWriters) forgetBefore(pos int64) {
	f := w.at(pos)
	for len(w.fences) > 1 && w.fences[0].off < f.off {
		w.fences = w.fences[1:]
	}
}

// admit applies the identity rules to entry e at park offset off and
// reports whether it counts; a fence that counts is in force from here.
func (w *parkWriters) admit(off int64, e parkEntry) bool {
	if e.group != w.group {
		return false
	}
	if e.kind == parkRelease {
		return true
	}
	cur := w.inForce()
	if e.kind == parkFence {
		if (e.gen < cur.gen && !e.reset) || (e.topicID != "" && w.topicID != "" && e.topicID != w.topicID) {
			return false
		}
		w.fences = append(w.fences, fenceMark{off, e.gen, e.proto})
		return true
	}
	return cur.off >= 0 && e.epoch == cur.off
}

// replay applies the park partition's entry e, at park offset off, read
// by the rebuild in offset order from the committed park position. It
// reports false for an entry that is not the group's own and in force
// (parkWriters): ignored.
func (ps *parkSet) replay(off int64, e parkEntry, now time.Time) bool {
	ps.end = max(ps.end, off+1)
	if !ps.w.admit(off, e) {
		return false
	}
	switch e.kind {
	case parkFence:
	case parkRecord:
		ps.add(e.session, off, e.src, now)
	case parkDone:
		ps.done(e.session, e.src, off, now)
	case parkHold:
		ps.held(e.session, e.src, off)
	case parkAttempt:
		ps.attempted(e.session, e.src, e.retries, off, now)
	case parkRelease:
		ps.release(e.session, now)
	default:
		return false
	}
	return true
}

// begin starts a rebuild at the committed park position pos, whose fence
// in force f was committed with it (f.off < pos); f.off -1: none, the
// rebuild starts at the new owner's own fence.
func (ps *parkSet) begin(pos int64, f fenceMark) {
	ps.end = max(ps.end, pos)
	if f.off >= 0 {
		ps.w.fences = append(ps.w.fences[:0], f)
	}
}

// epoch is the park offset of the fence in force: the one the current
// owner wrote when it took the partition; its entries carry it.
func (ps *parkSet) epoch() int64 { return ps.w.inForce().off }
