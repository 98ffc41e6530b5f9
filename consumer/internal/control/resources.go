package control

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// A resource (what ThrottlePolicy.Resource names: a tenant, a shard): its
// rate, held at admission (Gate.Admit), and its concurrency slots
// (Limit.Concurrency): taken by an attempt before it starts, given back
// when it returns, first come, first served.

// resource is one resource's state, made on first use and forgotten when
// idle (Tidy).
type resource struct {
	lim   *rate.Limiter       // nil: no rate
	slots *semaphore.Weighted // nil: no concurrency limit
	users int                 // records holding or waiting for a slot
}

// resourceOf is res's state, made on first use. g.mu held.
func (g *Gate) resourceOf(res string, now time.Time) *resource {
	r := g.res[res]
	if r == nil {
		var l Limit
		if g.resource != nil {
			l = g.resource(res)
		}
		r = &resource{lim: l.limiter(now)}
		if l.Concurrency > 0 {
			r.slots = semaphore.NewWeighted(int64(l.Concurrency))
		}
		g.res[res] = r
	}
	return r
}

// Slot waits, until ctx ends, for one of res's concurrency slots, first
// come first served; the caller gives it back with Release. A resource
// without a concurrency limit needs none: held is false, err nil.
func (g *Gate) Slot(ctx context.Context, res string, now time.Time) (held bool, err error) {
	g.mu.Lock()
	r := g.resourceOf(res, now)
	if r.slots == nil {
		g.mu.Unlock()
		return false, nil
	}
	r.users++
	g.mu.Unlock()
	if err := r.slots.Acquire(ctx, 1); err != nil {
		g.mu.Lock()
		r.users--
		g.mu.Unlock()
		return false, err
	}
	return true, nil
}

// TrySlot takes one of res's concurrency slots if one is free: ok is
// true when it did (held) or res needs none (held false), false when the
// caller must wait for one (Slot).
func (g *Gate) TrySlot(res string, now time.Time) (held, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.resourceOf(res, now)
	switch {
	case r.slots == nil:
		return false, true
	case r.slots.TryAcquire(1):
		r.users++
		return true, true
	}
	return false, false
}

// Release gives back a slot of res that Slot returned held.
func (g *Gate) Release(res string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.res[res]; r != nil && r.slots != nil {
		r.slots.Release(1)
		r.users--
	}
}
