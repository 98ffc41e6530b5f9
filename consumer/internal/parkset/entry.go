package parkset

// Kind tells the entries of a park partition apart (the
// lanes-park-kind header).
type Kind byte

const (
	KindRecord Kind = 'r' // a parked copy of a source record
	KindDone   Kind = 'd' // a session's records through Src are done
	KindHold   Kind = 'h' // a session is held, its records through Src done
	KindFence  Kind = 'f' // a new owner took the partition
	// KindAttempt: a retry of a session's head (its source offset) failed;
	// it carries the head's failed retries so far, so that a rebuild keeps
	// its budget and backoff.
	KindAttempt Kind = 'a'
	// KindRelease: an operator released a held session: from outside the
	// group (ReleaseHeld, lanes park release; the owner picks it up,
	// Set.ApplyRelease) or on the owner (Consumer.ReleaseParked, under its
	// epoch, applied once acknowledged).
	KindRelease Kind = 'l'
)

// Entry is one entry of a park partition as the rebuild reads it (the
// consumer parses it from the entry's lanes-park-* headers): its kind,
// its session, its source offset (a copy's own, a marker's through), and
// who wrote it: the group, the epoch (park offset of its writer's fence)
// and, on a fence, the writer's generation and the source topic's ID.
type Entry struct {
	Kind    Kind
	Session string
	Src     int64
	Epoch   int64
	Retries int    // KindAttempt: failed retries of the head
	Group   string // the writer's consumer group; "" when the entry names none
	Gen     int32  // KindFence: the owner's group generation (classic) or member epoch (KIP-848); -1 none
	Proto   string // KindFence: the group protocol Gen is of ("classic", "consumer"); "" unknown
	TopicID string // KindFence: the source topic's ID (hex) when known
	Reset   bool   // KindFence: its generation starts the comparison again
}

// Fence is a fence marker the identity rules accepted: its park offset
// (the epoch its owner's entries carry), its owner's generation and the
// group protocol that generation is of ("" unknown).
type Fence struct {
	Off   int64
	Gen   int32
	Proto string
}

// NoFence is the fence in force before any.
var NoFence = Fence{-1, -1, ""}

// OtherProtocol reports whether fence f, in force above a new owner's own
// fence (its generation higher), is of the other group protocol than the
// owner's proto, both known: the group's protocol switched and its
// generations started again, and the owner writes a reset fence
// (Entry.Reset) to start the comparison again from its own. Of the same
// protocol (or either unknown), a later owner's fence is in force: the
// new owner lost the partition while taking it up, and must write no
// reset fence (it would put itself in force over the real owner's).
func (f Fence) OtherProtocol(proto string) bool {
	return f.Proto != "" && proto != "" && f.Proto != proto
}

// writers are the identity rules of one park partition for one group:
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
//   - a release: always, whatever its epoch (an operator's decision,
//     written from outside the group or through an owner, the epoch
//     saying which; releasing a session that is not held does nothing);
//   - any other entry: it was written under the fence in force (its epoch
//     is that fence's park offset). An entry under an older fence landed
//     after a newer owner took the partition; one under a fence not taken
//     (late, or of another incarnation) was never the owner's.
//
// The commit keeps the fence in force at the committed park position
// (Set.CommitFence): a rebuild starts knowing it (Set.Begin). With no
// committed park position nothing before the new owner's own fence is the
// group's (a new group, a re-created topic, an offset reset, parking
// turned on later): Start.
type writers struct {
	group   string
	topicID string  // the source topic's current ID; "" unknown
	fences  []Fence // fences taken, in offset order; the last is in force
}

// inForce is the fence in force: NoFence before any.
func (w *writers) inForce() Fence {
	if n := len(w.fences); n > 0 {
		return w.fences[n-1]
	}
	return NoFence
}

// at is the fence in force at park offset pos: the last taken below it.
func (w *writers) at(pos int64) Fence {
	f := NoFence
	for _, m := range w.fences {
		if m.Off < pos {
			f = m
		}
	}
	return f
}

// forgetBefore drops the fences taken before the one in force at pos: a
// commit at pos no longer needs them.
func (w *writers) forgetBefore(pos int64) {
	f := w.at(pos)
	for len(w.fences) > 1 && w.fences[0].Off < f.Off {
		w.fences = w.fences[1:]
	}
}

// admit applies the identity rules to entry e at park offset off and
// reports whether it counts; a fence that counts is in force from here.
func (w *writers) admit(off int64, e Entry) bool {
	if e.Group != w.group {
		return false
	}
	if e.Kind == KindRelease {
		return true
	}
	cur := w.inForce()
	if e.Kind == KindFence {
		if (e.Gen < cur.Gen && !e.Reset) || (e.TopicID != "" && w.topicID != "" && e.TopicID != w.topicID) {
			return false
		}
		w.fences = append(w.fences, Fence{off, e.Gen, e.Proto})
		return true
	}
	return cur.Off >= 0 && e.Epoch == cur.Off
}
