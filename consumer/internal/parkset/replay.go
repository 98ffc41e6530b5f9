package parkset

import "time"

// The parked set and its park partition's entries: a rebuild replays them
// under the identity rules (entry.go), the owner picks up an operator's
// release markers, and a commit carries the fence in force at its park
// position.

// Replay applies the park partition's entry e, at park offset off, read
// by the rebuild in offset order from the committed park position. It
// reports false for an entry that is not the group's own and in force
// (writers): ignored.
func (ps *Set) Replay(off int64, e Entry, now time.Time) bool {
	ps.end = max(ps.end, off+1)
	if !ps.w.admit(off, e) {
		return false
	}
	switch e.Kind {
	case KindFence:
	case KindRecord:
		ps.Add(e.Session, off, e.Src, now)
	case KindDone:
		ps.Done(e.Session, e.Src, off, now)
	case KindHold:
		ps.Held(e.Session, e.Src, off)
	case KindAttempt:
		ps.attempted(e.Session, e.Src, e.Retries, off, now)
	case KindRelease:
		ps.Release(e.Session, now)
	default:
		return false
	}
	return true
}

// ApplyRelease applies release marker e, at park offset off, that the
// owner picked up from its park partition after its rebuild, and reports
// whether it released e's session: e is a release of the set's group and
// the session is held by a hold marker written before it. A release
// written before the session's hold (a second release of an earlier hold,
// read late) is not for this hold: a rebuild, replaying in offset order,
// would not apply it either.
func (ps *Set) ApplyRelease(off int64, e Entry, now time.Time) bool {
	if e.Kind != KindRelease || e.Group != ps.w.group {
		return false
	}
	ss := ps.sessions[e.Session]
	return ss != nil && ss.held && off > ss.holdOffset && ps.Release(e.Session, now)
}

// Begin starts a rebuild at the committed park position pos, whose fence
// in force f was committed with it (f.Off < pos); f.Off -1: none, the
// rebuild starts at the new owner's own fence.
func (ps *Set) Begin(pos int64, f Fence) {
	ps.end = max(ps.end, pos)
	if f.Off >= 0 {
		ps.w.fences = append(ps.w.fences[:0], f)
	}
}

// Epoch is the park offset of the fence in force: the one the current
// owner wrote when it took the partition; its entries carry it.
func (ps *Set) Epoch() int64 { return ps.w.inForce().Off }

// SetTopicID tells the identity rules the source topic's current ID
// (hex; "" unknown): a fence naming another ID is of an earlier
// incarnation of the topic, and not taken.
func (ps *Set) SetTopicID(id string) { ps.w.topicID = id }

// InForce is the fence in force: NoFence before any.
func (ps *Set) InForce() Fence { return ps.w.inForce() }

// CommitFence is the fence in force at park position pos, which a commit
// at pos carries; the fences taken before it, which such a commit no
// longer needs, are dropped.
func (ps *Set) CommitFence(pos int64) Fence {
	ps.w.forgetBefore(pos)
	return ps.w.at(pos)
}
