package regrow

import (
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

// Part names a partition of a topic.
type Part struct {
	Topic     string
	Partition int32
}

// Wait is a moved session waiting on its new partition for the group to
// pass its records on its old ones.
type Wait struct {
	At      Part
	Session string
	// Level is the count the session's record is stamped with: it waits
	// for the records of the old partitions stamped with older counts.
	Level int
	Since time.Time
	// Old are the old partitions (of At.Topic) and, once measured, the end
	// offset each had when the wait began (-1 until then).
	Old []Barrier
	// Released is closed when the wait ends.
	Released chan struct{}
	// ParkedOn is, once Released is closed, the old partition on which the
	// session is parked (-1: none, the record runs): the waiter parks its
	// record behind the session's parked ones instead of running it.
	ParkedOn int32
	waiters  int
}

// Olds is what the old partitions' owners last said in their commits.
type Olds interface {
	// Floor is the floor of (topic, q) for level (Floors); false: none
	// known.
	Floor(topic string, q int32, level int) (int64, bool)
	// Parked reports whether session may be parked on (topic, q) with a
	// record placed by a count older than level: not known to be free.
	Parked(topic string, q int32, session string, level int) bool
}

// Barrier is an old partition and the offset its floor for the wait's
// level must reach (Floors).
type Barrier struct {
	Partition int32
	End       int64
}

type waitKey struct {
	at      Part
	session string
	level   int
}

// Holds are a member's waits of moved sessions, and the sessions released
// on each partition it owns. Safe for concurrent use.
type Holds struct {
	mu       sync.Mutex
	waits    map[waitKey]*Wait
	released map[Part]map[string]int // the level each session was released at
}

// Enter makes session on partition at wait for its old partitions old
// (from OldHomes) for a record stamped with count level, at now, unless it
// was released there for that level or a newer one since the member owns
// at. It returns nil when the session need not wait; else the wait,
// shared with the session's other records of that level that wait. Each
// non-nil return is paired with one Leave.
func (h *Holds) Enter(at Part, session string, level int, old []int32, now time.Time) *Wait {
	if len(old) == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.released[at][session]; ok && l >= level {
		return nil
	}
	k := waitKey{at, session, level}
	w := h.waits[k]
	if w == nil {
		session = strings.Clone(session) // it may point into a fetch buffer, and is kept until the change settles
		k.session = session
		w = &Wait{At: at, Session: session, Level: level, Since: now, Released: make(chan struct{}), ParkedOn: -1}
		for _, q := range old {
			w.Old = append(w.Old, Barrier{Partition: q, End: -1})
		}
		if h.waits == nil {
			h.waits = map[waitKey]*Wait{}
		}
		h.waits[k] = w
	}
	w.waiters++
	return w
}

// Leave ends one record's part in w: the wait is forgotten when no record
// is in it (released, or its partition given up).
func (h *Holds) Leave(w *Wait) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.waiters--; w.waiters == 0 {
		k := waitKey{w.At, w.Session, w.Level}
		if h.waits[k] == w {
			delete(h.waits, k)
		}
	}
}

// Unmeasured lists, per topic, the old partitions whose end offsets a
// wait still needs.
func (h *Holds) Unmeasured() map[string][]int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]int32{}
	for _, w := range h.waits {
		for _, b := range w.Old {
			if b.End < 0 && !slices.Contains(out[w.At.Topic], b.Partition) {
				out[w.At.Topic] = append(out[w.At.Topic], b.Partition)
			}
		}
	}
	return out
}

// Measured gives the waits that need one, and began before asOf, the end
// offset of (topic, q) a listing sent at asOf returned: a wait that began
// later may wait for a record the listing did not see.
func (h *Holds) Measured(topic string, q int32, end int64, asOf time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waits {
		if w.At.Topic != topic || !w.Since.Before(asOf) {
			continue
		}
		for i := range w.Old {
			if w.Old[i].Partition == q && w.Old[i].End < 0 {
				w.Old[i].End = end
			}
		}
	}
}

// Release ends every wait whose barriers the old partitions' floors have
// reached, as their owners last committed them (o), and remembers its
// session as released on its partition: its later records of the level
// need not wait. A session parked on one of its old partitions is not
// let run: with canPark its wait ends with ParkedOn set (its records go to
// the park topic behind the parked ones, and their retry waits for those,
// ParkedAway); without, it waits on. It returns how many waits it released
// and ended parked.
func (h *Holds) Release(o Olds, canPark bool) (released, parked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, w := range h.waits {
		if !passed(w, o) {
			continue
		}
		if on := parkedOn(w, o); on >= 0 {
			if !canPark {
				continue
			}
			w.ParkedOn = on
			parked++
		} else {
			released++
		}
		if h.released == nil {
			h.released = map[Part]map[string]int{}
		}
		if h.released[w.At] == nil {
			h.released[w.At] = map[string]int{}
		}
		h.released[w.At][w.Session] = max(h.released[w.At][w.Session], w.Level)
		close(w.Released)
		delete(h.waits, k)
	}
	return released, parked
}

func passed(w *Wait, o Olds) bool {
	for _, b := range w.Old {
		if b.End < 0 {
			return false
		}
		if f, ok := o.Floor(w.At.Topic, b.Partition, w.Level); !ok || f < b.End {
			return false
		}
	}
	return true
}

// parkedOn is the first old partition of w on which its session is
// parked (-1: none).
func parkedOn(w *Wait, o Olds) int32 {
	for _, b := range w.Old {
		if o.Parked(w.At.Topic, b.Partition, w.Session, w.Level) {
			return b.Partition
		}
	}
	return -1
}

// ParkedAway reports whether session, parked on partition at with a
// record stamped pl (its key key), may still be parked on one of its old
// partitions under h: its retry waits (the parked records there go
// first).
func ParkedAway(h History, o Olds, at Part, pl hashring.Placement, key []byte, session string) bool {
	for _, q := range OldHomes(h, pl, key, at.Partition) {
		if o.Parked(at.Topic, q, session, pl.Count) {
			return true
		}
	}
	return false
}

// SessionHash is the 32-bit FNV-1a hash of a session ID: commits name the
// sessions parked on a partition by it (a collision only makes another
// session wait too).
func SessionHash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Forget drops what the member knew of partition at (it lost it): the
// sessions released there wait again under a next owner, which cannot
// know them, and its waits are released no more (their records end as
// fenced; a later Release must not mark their sessions released).
func (h *Holds) Forget(at Part) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.released, at)
	for k := range h.waits {
		if k.at == at {
			delete(h.waits, k)
		}
	}
}

// Gone drops what the member knew of topic, deleted (and perhaps made
// again: its partitions are not the old ones): its waits are released no
// more (their records end with their fenced partitions), and the sessions
// released on its partitions are forgotten, as in Forget.
func (h *Holds) Gone(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.released {
		if p.Topic == topic {
			delete(h.released, p)
		}
	}
	for k := range h.waits {
		if k.at.Topic == topic {
			delete(h.waits, k)
		}
	}
}

// Settled ends topic's change: its waits are released (every record
// stamped older than its newest count is handled) and the sessions
// released on its partitions are forgotten, as nothing of it waits again.
func (h *Holds) Settled(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.released {
		if p.Topic == topic {
			delete(h.released, p)
		}
	}
	for k, w := range h.waits {
		if k.at.Topic == topic {
			close(w.Released)
			delete(h.waits, k)
		}
	}
}

// Snapshot lists the waits, oldest first.
func (h *Holds) Snapshot() []Wait {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Wait, 0, len(h.waits))
	for _, w := range h.waits {
		c := *w
		c.Old = slices.Clone(w.Old)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Wait) int { return a.Since.Compare(b.Since) })
	return out
}

// Len is the number of sessions waiting.
func (h *Holds) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waits)
}
