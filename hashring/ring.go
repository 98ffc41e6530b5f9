package hashring

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Errors returned by [Ring]. Callers branch on them with errors.Is.
var (
	// ErrEmptyRing: a lookup on a ring with no members.
	ErrEmptyRing = errors.New("hashring: ring has no members")
	// ErrDuplicateMember: Add of a member already on the ring.
	ErrDuplicateMember = errors.New("hashring: member already on the ring")
	// ErrUnknownMember: Remove of a member not on the ring.
	ErrUnknownMember = errors.New("hashring: member not on the ring")
	// ErrEmptyMember: a member name of "".
	ErrEmptyMember = errors.New("hashring: member name is empty")
	// ErrBadConfig: a RingConfig field out of range.
	ErrBadConfig = errors.New("hashring: bad ring config")
)

// RingConfig configures a [Ring]. The zero value is a plain consistent-hash
// ring with the defaults below.
type RingConfig struct {
	// VirtualNodes is the number of points each member owns on the ring.
	// More points give a more even balance and cost memory (16 bytes a
	// point) and rebuild time. Default: 256 (max/mean load about 1.1 for
	// 10 members).
	VirtualNodes int

	// LoadFactor is ε of bounded-load placement: [Ring.Assign] never puts a
	// member above ceil((1+ε)·mean) assigned keys. Zero turns bounded load
	// off (Assign then places exactly like Get). Must be 0 or > 0.
	// Default: 0.
	LoadFactor float64
}

const defaultVirtualNodes = 256

func (c RingConfig) withDefaults() (RingConfig, error) {
	if c.VirtualNodes < 0 {
		return c, fmt.Errorf("%w: VirtualNodes must be >= 0, got %d", ErrBadConfig, c.VirtualNodes)
	}
	if c.LoadFactor < 0 || c.LoadFactor != c.LoadFactor {
		return c, fmt.Errorf("%w: LoadFactor must be >= 0, got %v", ErrBadConfig, c.LoadFactor)
	}
	if c.VirtualNodes == 0 {
		c.VirtualNodes = defaultVirtualNodes
	}
	return c, nil
}

// Ring places keys on named members with consistent hashing over virtual
// nodes. Adding a member moves to it only the keys it now owns; removing one
// moves only the keys it owned. Nothing else moves.
//
// Lookups ([Ring.Get], [Ring.GetHash]) are lock-free and allocation-free:
// membership changes build a new immutable table and publish it atomically
// (copy-on-write), so lookups may run concurrently with Add and Remove.
//
// Bounded load ([Ring.Assign], [Ring.Release]) keeps per-member counts and is
// serialised by a mutex. A bounded-load choice depends on the loads at the
// moment it is made, so it must stay fixed while the key has work in flight:
// Assign pins the key to its member until Release. A session that changed
// member mid-flight could run two of its messages at once and break order.
type Ring struct {
	cfg   RingConfig
	state atomic.Pointer[ringState]

	mu     sync.Mutex        // serialises Add, Remove, Assign, Release
	pinned map[string]string // key → member, bounded-load assignments
	load   map[string]int    // member → pinned keys
}

type point struct {
	hash   uint64
	member int32 // index into ringState.members
}

// ringState is immutable once published.
type ringState struct {
	members []string // sorted
	points  []point  // sorted by hash, then member name
	index   []uint32 // index[b]: first point whose hash >= b<<shift
	shift   uint
}

// NewRing returns a ring with the given members. It fails on a bad config,
// an empty member name or a duplicate member.
func NewRing(cfg RingConfig, members ...string) (*Ring, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Ring{cfg: cfg, pinned: map[string]string{}, load: map[string]int{}}
	r.state.Store(&ringState{})
	if err := r.Add(members...); err != nil {
		return nil, err
	}
	return r, nil
}

// Add puts members on the ring. It fails, changing nothing, if a name is
// empty, repeated, or already on the ring.
func (r *Ring) Add(members ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.state.Load()
	next := slices.Clone(cur.members)
	for _, m := range members {
		if m == "" {
			return ErrEmptyMember
		}
		if _, found := slices.BinarySearch(next, m); found {
			return fmt.Errorf("%w: %q", ErrDuplicateMember, m)
		}
		next = append(next, m)
		slices.Sort(next)
	}
	r.state.Store(buildState(next, r.cfg.VirtualNodes))
	return nil
}

// Remove takes members off the ring. Bounded-load pins held by a removed
// member are dropped: drain a member's work before removing it. It fails,
// changing nothing, if a member is not on the ring.
func (r *Ring) Remove(members ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := slices.Clone(r.state.Load().members)
	for _, m := range members {
		i, found := slices.BinarySearch(next, m)
		if !found {
			return fmt.Errorf("%w: %q", ErrUnknownMember, m)
		}
		next = slices.Delete(next, i, i+1)
	}
	for _, m := range members {
		delete(r.load, m)
	}
	for k, m := range r.pinned {
		if _, found := slices.BinarySearch(next, m); !found {
			delete(r.pinned, k)
		}
	}
	r.state.Store(buildState(next, r.cfg.VirtualNodes))
	return nil
}

// Members returns the members, sorted.
func (r *Ring) Members() []string { return slices.Clone(r.state.Load().members) }

// Len returns the number of members.
func (r *Ring) Len() int { return len(r.state.Load().members) }

// Get returns the member that owns key (hashed with [Sum64]).
// It returns [ErrEmptyRing] when the ring has no members.
func (r *Ring) Get(key string) (string, error) { return r.GetHash(Sum64(key)) }

// GetHash is [Ring.Get] for a key already hashed with [Sum64].
func (r *Ring) GetHash(h uint64) (string, error) {
	s := r.state.Load()
	if len(s.points) == 0 {
		return "", ErrEmptyRing
	}
	return s.members[s.points[s.find(h)].member], nil
}

// find returns the index of the first point with hash >= h, wrapping to 0.
func (s *ringState) find(h uint64) int {
	i := int(s.index[h>>s.shift])
	for i < len(s.points) && s.points[i].hash < h {
		i++
	}
	if i == len(s.points) {
		return 0
	}
	return i
}

func buildState(members []string, vnodes int) *ringState {
	s := &ringState{members: members}
	if len(members) == 0 {
		return s
	}
	s.points = make([]point, 0, len(members)*vnodes)
	var buf [8]byte
	for mi, m := range members {
		d := xxhash.New()
		for v := 0; v < vnodes; v++ {
			d.Reset()
			_, _ = d.WriteString(m)
			binary.LittleEndian.PutUint64(buf[:], uint64(v))
			_, _ = d.Write(buf[:])
			s.points = append(s.points, point{hash: d.Sum64(), member: int32(mi)})
		}
	}
	slices.SortFunc(s.points, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(members[a.member], members[b.member])
	})
	// About one point per index bucket keeps the forward scan in find short.
	ibits := bits.Len(uint(len(s.points)))
	ibits = min(max(ibits, 4), 20)
	s.shift = uint(64 - ibits)
	s.index = make([]uint32, 1<<ibits)
	p := 0
	for b := range s.index {
		start := uint64(b) << s.shift
		for p < len(s.points) && s.points[p].hash < start {
			p++
		}
		s.index[b] = uint32(p)
	}
	return s
}
