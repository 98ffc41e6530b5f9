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

// Committed is the park section of a group's commit as a rebuild or
// InspectParked finds it: the park position (-1: none), the fence in
// force there, and the IDs of the source and park topics it was committed
// under ("" unknown).
type Committed struct {
	Pos         int64
	Fence       Fence
	TopicID     string
	ParkTopicID string
}

// NoCommit is no committed park section: nothing in the park partition
// is the group's.
var NoCommit = Committed{Pos: -1, Fence: NoFence}

// Origin says where a rebuild starts reading (Start).
type Origin byte

const (
	// FromCommit: at the committed park position.
	FromCommit Origin = iota
	// NoPosition: none is committed (a new group, an offset reset, a
	// source topic deleted and made again, parking turned on later).
	NoPosition
	// OtherTopic: the position was committed under an earlier incarnation
	// of the source topic: its parked sessions are not this topic's.
	OtherTopic
	// ParkTopicLost: the park topic was deleted and made again (or
	// truncated) since the commit (its ID differs, or the position is past
	// its end): the sessions parked then are lost, their records are not
	// in it (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#identity).
	ParkTopicLost
)

// Start is where a rebuild of the park partition reads from, and the
// fence in force there, given the group's committed park section c, the
// source and park topics' IDs now ("" unknown) and end: the new owner's
// own fence (a rebuild), or the park partition's end (InspectParked). It
// is c's position and fence when c is of these topics and not past end;
// else nothing before end is the group's: end and NoFence, why says
// which (the rebuild then starts at the owner's own fence; InspectParked
// has nothing to read).
func Start(c Committed, topicID, parkTopicID string, end int64) (pos int64, f Fence, why Origin) {
	switch {
	case c.Pos < 0:
		return end, NoFence, NoPosition
	case c.TopicID != "" && topicID != "" && c.TopicID != topicID:
		return end, NoFence, OtherTopic
	case (c.ParkTopicID != "" && parkTopicID != "" && c.ParkTopicID != parkTopicID) || c.Pos > end:
		return end, NoFence, ParkTopicLost
	}
	return c.Pos, c.Fence, FromCommit
}

// Begin starts a rebuild at the committed park position pos, whose fence
// in force f was committed with it (f.Off < pos); f.Off -1: none, the
// rebuild starts at the new owner's own fence (Start says which).
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
