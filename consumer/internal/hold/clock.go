package hold

import (
	"strings"
	"sync"
	"time"
)

// Kind is what holds this member's work as a whole.
type Kind uint8

const (
	Silence Kind = 1 << iota // the silence hold (the consumer's silence.go)
	Breaker                  // the circuit breaker is open (internal/breaker)
)

// String names the holds in force, as Stats.WorkHeld shows them.
func (k Kind) String() string {
	var out []string
	if k&Silence != 0 {
		out = append(out, "silence hold")
	}
	if k&Breaker != 0 {
		out = append(out, "breaker open")
	}
	return strings.Join(out, ", ")
}

// Clock measures the time during which this member's work was held as
// a whole, for the stall clocks. Its writers call Set under the lock that
// orders their own transitions (membership.mu, breaker.mu), so the begin
// and the end of one kind never cross; two kinds in force at once count
// once. A nil Clock is never held.
type Clock struct {
	mu    sync.Mutex
	on    Kind          // the holds in force
	since time.Time     // when the current held spell began (on != 0)
	total time.Duration // the length of the held spells that ended
}

// Set records that hold k began (on) or ended at now.
func (h *Clock) Set(k Kind, on bool, now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case on && h.on&k == 0:
		if h.on == 0 {
			h.since = now
		}
		h.on |= k
	case !on && h.on&k != 0:
		h.on &^= k
		if h.on == 0 {
			h.total += max(now.Sub(h.since), 0)
		}
	}
}

// Reading is the hold clock at one instant.
type Reading struct {
	Total time.Duration // time held since the clock was made
	On    Kind          // the holds in force
}

// Read returns the hold clock at now.
func (h *Clock) Read(now time.Time) Reading {
	if h == nil {
		return Reading{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := Reading{Total: h.total, On: h.on}
	if h.on != 0 {
		r.Total += max(now.Sub(h.since), 0)
	}
	return r
}
