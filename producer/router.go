package producer

import "github.com/lanesdev/lanes/hashring"

// Router tells which of several producer instances owns a session, so a
// gateway can forward all of a session's messages to one instance and keep
// their order. It is a consistent-hash ring (hashring.Ring): adding or
// removing an instance moves only about 1/n of the sessions, and only those
// that the changed instance gains or loses. Safe for concurrent use; lookups
// never block on membership changes.
type Router struct {
	ring *hashring.Ring
}

// NewRouter returns a router over the named instances. Names must be
// non-empty and unique.
func NewRouter(instances ...string) (*Router, error) {
	r, err := hashring.NewRing(hashring.RingConfig{}, instances...)
	if err != nil {
		return nil, err
	}
	return &Router{ring: r}, nil
}

// Owner returns the instance that owns session; hashring.ErrEmptyRing when
// there are no instances.
func (r *Router) Owner(session string) (string, error) { return r.ring.Get(session) }

// Add adds instances (hashring.ErrDuplicateMember for a known one).
func (r *Router) Add(instances ...string) error { return r.ring.Add(instances...) }

// Remove removes instances (hashring.ErrUnknownMember for an unknown one).
// Sessions owned by a removed instance should be drained before their new
// owner takes them, or two instances may briefly send one session.
func (r *Router) Remove(instances ...string) error { return r.ring.Remove(instances...) }

// Instances returns the current instances, sorted.
func (r *Router) Instances() []string { return r.ring.Members() }
