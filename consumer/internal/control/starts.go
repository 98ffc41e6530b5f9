package control

import (
	"time"

	"golang.org/x/time/rate"
)

// Starts. A rate's token is reserved when a record asks (Admit), in the
// order asked, and the record is told when it is due; its lane is woken
// then. A lane woken late (a busy scheduler, a handler still running)
// would start its record late, and the records behind it, whose tokens
// the late one's lateness left in the bucket, at once after it: starts
// would bunch past Burst. So a record also passes, as it starts, a second
// bucket of the same limit that counts starts (a start bucket, one per
// token bucket in use): the gate starts at most Burst + Rate × W of a
// session's (or a resource's) records in any window W, whatever the
// lateness of their lanes.

// startWait is how long a record holding tokens of sl and rl (either nil:
// no rate) must still wait to start at now (0: it starts, and its starts
// are counted). g.mu held.
func (g *Gate) startWait(sl, rl *rate.Limiter, now time.Time) time.Duration {
	var ss [2]*rate.Limiter
	var wait time.Duration
	for i, lim := range [2]*rate.Limiter{sl, rl} {
		if lim == nil {
			continue
		}
		s := g.startsOf(lim, now)
		if tokens := s.TokensAt(now); tokens < 1 {
			wait = max(wait, time.Duration((1-tokens)/float64(s.Limit())*float64(time.Second))+time.Microsecond)
		}
		ss[i] = s
	}
	if wait > 0 {
		return wait
	}
	for _, s := range ss {
		if s != nil {
			s.AllowN(now, 1)
		}
	}
	return 0
}

// startsOf is the start bucket of token bucket lim: made on first use,
// full at now.
func (g *Gate) startsOf(lim *rate.Limiter, now time.Time) *rate.Limiter {
	s := g.starts[lim]
	if s == nil {
		s = Limit{Rate: float64(lim.Limit()), Burst: lim.Burst()}.limiter(now)
		if g.starts == nil {
			g.starts = map[*rate.Limiter]*rate.Limiter{}
		}
		g.starts[lim] = s
	}
	return s
}

// idle reports whether token bucket lim and its start bucket are full at
// now: forgetting them changes nothing. g.mu held.
func (g *Gate) idle(lim *rate.Limiter, now time.Time) bool {
	s := g.starts[lim]
	return full(lim, now) && (s == nil || full(s, now))
}

// tidyStarts forgets the start buckets of token buckets no longer in use,
// and those full at now (made again, as full, when next asked). g.mu held.
func (g *Gate) tidyStarts(now time.Time) {
	inUse := map[*rate.Limiter]bool{}
	for _, lim := range g.limits {
		inUse[lim] = true
	}
	for _, r := range g.res {
		if r.lim != nil {
			inUse[r.lim] = true
		}
	}
	for lim, s := range g.starts {
		if !inUse[lim] || full(s, now) {
			delete(g.starts, lim)
		}
	}
}
