package hashring

import "math"

// Assign returns the member for key and pins key to it until [Ring.Release].
// With LoadFactor ε > 0 it walks the ring from the key's point and takes the
// first member whose pinned count is below ceil((1+ε)·(pinned+1)/members),
// so no member holds more than (1+ε) times the mean. With LoadFactor 0 it
// chooses exactly like [Ring.Get].
//
// Assigning a key that is already pinned returns its member again without
// counting it twice. The choice is sticky: it does not change while the key
// stays pinned, even if members are added, because a session that moved
// while it had work in flight could lose its order.
func (r *Ring) Assign(key string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.pinned[key]; ok {
		return m, nil
	}
	s := r.state.Load()
	if len(s.points) == 0 {
		return "", ErrEmptyRing
	}
	i := s.find(Sum64(key))
	m := s.members[s.points[i].member]
	if r.cfg.LoadFactor > 0 {
		limit := int(math.Ceil((1 + r.cfg.LoadFactor) * float64(len(r.pinned)+1) / float64(len(s.members))))
		for n := 0; n < len(s.points); n++ {
			c := s.members[s.points[(i+n)%len(s.points)].member]
			if r.load[c] < limit {
				m = c
				break
			}
		}
	}
	r.pinned[key] = m
	r.load[m]++
	return m, nil
}

// Release unpins key. Releasing a key that is not pinned does nothing.
func (r *Ring) Release(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.pinned[key]
	if !ok {
		return
	}
	delete(r.pinned, key)
	if r.load[m]--; r.load[m] <= 0 {
		delete(r.load, m)
	}
}

// Load returns how many keys are pinned to member by [Ring.Assign].
func (r *Ring) Load(member string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load[member]
}
