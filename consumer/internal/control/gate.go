package control

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limit bounds a session or a resource: Rate records per second, with
// bursts of Burst (at least 1), and, for a resource, Concurrency records
// in progress at once. A zero field bounds nothing.
type Limit struct {
	Rate        float64
	Burst       int
	Concurrency int
}

// limiter is the token bucket of l, nil when l has no rate.
func (l Limit) limiter(now time.Time) *rate.Limiter {
	if l.Rate <= 0 {
		return nil
	}
	lim := rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	lim.SetLimitAt(now, rate.Limit(l.Rate)) // its bucket starts full at now, not at the zero time
	return lim
}

// Ticket is what a record has been admitted through so far, kept with it
// across its lane's waits: a rate's token is taken once.
type Ticket struct {
	SessionRated, ResourceRated bool
	// NotBefore is when the last token taken is due: a lane woken early
	// (a wake of an earlier wait) is told to wait again.
	NotBefore time.Time
	// the tokens taken, given back when the session is paused before its
	// record ran: it takes them again, at their rate, once resumed
	sess, res       *rate.Reservation
	sessLim, resLim *rate.Limiter // the buckets they came from
}

// cancel gives back the tokens t took at now, for its record to take
// them again later.
func (t *Ticket) cancel(now time.Time) {
	for _, r := range []*rate.Reservation{t.sess, t.res} {
		if r != nil {
			r.CancelAt(now)
		}
	}
	*t = Ticket{}
}

// Verdict is Admit's answer for a record.
type Verdict struct {
	Go     bool      // it may start now
	Paused bool      // its session is paused: the wake given is kept until it is resumed
	Until  time.Time // rate-limited: ask again then
}

// Gate is the control state of one group's sessions on one member: the
// settings read from the control topic, the rate limiters of sessions and
// resources, and the wakes of paused sessions' lanes.
type Gate struct {
	group    string
	session  Limit              // every session's limit, unless a setting names its own
	resource func(string) Limit // a resource's limit, asked once per resource

	// snap is a copy of settings for readers without mu, made again on
	// the first read after a change (stale marks one): a session that has
	// no setting, with no default limit and no resource, is admitted
	// without taking mu (the common case pays a map lookup).
	snap  atomic.Pointer[map[Key]Setting]
	stale atomic.Bool

	mu       sync.Mutex
	settings map[Key]Setting
	limits   map[Key]*rate.Limiter  // sessions with a rate
	sleepers map[Key]map[any]func() // lanes waiting for a paused session's resume
	rated    map[Key]map[any]func() // lanes waiting for a session's rate: woken early when it changes
	res      map[string]*resource
}

// NewGate is the gate of group, with session the limit of every session
// (a setting's rate replaces it) and limitOf the limit of each resource
// (nil: none).
func NewGate(group string, session Limit, limitOf func(string) Limit) *Gate {
	return &Gate{group: group, session: session, resource: limitOf,
		settings: map[Key]Setting{}, limits: map[Key]*rate.Limiter{}, sleepers: map[Key]map[any]func(){}, rated: map[Key]map[any]func(){},
		res: map[string]*resource{}}
}

// Group is the group whose entries the gate takes.
func (g *Gate) Group() string { return g.group }

// Apply takes one entry of the control topic, in log order: s is the
// session's setting from now on (empty: none). It returns the wakes of the
// lanes that waited for the session while it was paused and now is not,
// for the caller to call.
func (g *Gate) Apply(k Key, s Setting, now time.Time) (wakes []func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.settings[k]
	if s.Empty() {
		delete(g.settings, k)
	} else {
		g.settings[k.clone()] = s
	}
	g.stale.Store(true)
	switch {
	case s.Rate > 0 && (s.Rate != was.Rate || s.Burst != was.Burst || g.limits[k] == nil):
		// A new bucket, empty: the new limit holds from now, with no
		// tokens carried over from the old one (records waiting for one
		// take it again from this bucket).
		lim := Limit{Rate: s.Rate, Burst: s.Burst}.limiter(now)
		lim.ReserveN(now, lim.Burst())
		g.limits[k.clone()] = lim
	case s.Rate > 0: // unchanged
	case was.Rate > 0:
		delete(g.limits, k) // its own limit ends: the default, if any, starts full
	}
	if !s.Paused {
		for _, w := range g.sleepers[k] {
			wakes = append(wakes, w)
		}
		delete(g.sleepers, k)
	}
	if s.Rate != was.Rate || s.Burst != was.Burst { // its new limit decides their waits
		for _, w := range g.rated[k] {
			wakes = append(wakes, w)
		}
		delete(g.rated, k)
	}
	return wakes
}

// Setting returns k's setting, if any.
func (g *Gate) Setting(k Key) (Setting, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.settings[k]
	return s, ok
}

// Paused reports whether k is paused.
func (g *Gate) Paused(k Key) bool {
	return g.settingsNow()[k].Paused
}

// settingsNow is the settings as of the last change, read without mu
// (made again once after a change).
func (g *Gate) settingsNow() map[Key]Setting {
	if m := g.snap.Load(); m != nil && !g.stale.Load() {
		return *m
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stale.Load() || g.snap.Load() == nil {
		m := make(map[Key]Setting, len(g.settings))
		for k, s := range g.settings {
			m[k] = s
		}
		g.snap.Store(&m)
		g.stale.Store(false)
	}
	return *g.snap.Load()
}

// Admit decides whether a record of session k, using resource res ("":
// none), may start at now; t is what it has been admitted through before.
// When k is paused, wake is kept (under id: one per waiter) and called
// once it is resumed. When a rate holds it, its token is taken (the record
// is next) and Until says when it may start.
func (g *Gate) Admit(k Key, res string, t *Ticket, now time.Time, id any, wake func()) Verdict {
	if g.Free(k, res, t) {
		return Verdict{Go: true}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.settings[k].Paused {
		g.keep(g.sleepers, k, id, wake)
		if ws := g.rated[k]; ws != nil { // it waits for the resume now, not for a token
			if delete(ws, id); len(ws) == 0 {
				delete(g.rated, k)
			}
		}
		t.cancel(now) // a token taken before the pause would let it run at once after, with the next behind it
		return Verdict{Paused: true}
	}
	sl := g.sessionLimiter(k, now)
	var rl *rate.Limiter
	if res != "" {
		rl = g.resourceOf(res, now).lim
	}
	if t.SessionRated && t.sessLim != sl || t.ResourceRated && t.resLim != rl {
		t.cancel(now) // its limit changed meanwhile: the new one decides
	}
	if now.Before(t.NotBefore) {
		g.keep(g.rated, k, id, wake)
		return Verdict{Until: t.NotBefore}
	}
	if !t.SessionRated {
		t.SessionRated, t.sessLim = true, sl
		var d time.Duration
		if t.sess, d = reserve(sl, now); d > 0 {
			t.NotBefore = now.Add(d)
			g.keep(g.rated, k, id, wake)
			return Verdict{Until: t.NotBefore}
		}
	}
	if res != "" && !t.ResourceRated {
		t.ResourceRated, t.resLim = true, rl
		var d time.Duration
		if t.res, d = reserve(rl, now); d > 0 {
			t.NotBefore = now.Add(d)
			return Verdict{Until: t.NotBefore}
		}
	}
	return Verdict{Go: true}
}

// Free reports, without the gate's lock, that nothing can hold a record
// of session k using res with ticket t: no setting of k in force, no
// default session limit, no resource, no token taken before. Admit would
// let it go.
func (g *Gate) Free(k Key, res string, t *Ticket) bool {
	if res != "" || g.session.Rate > 0 || t.SessionRated {
		return false
	}
	_, set := g.settingsNow()[k]
	return !set
}

// reserve takes a token of lim at now and returns it and how long until
// it is due (0: now, or no limit).
func reserve(lim *rate.Limiter, now time.Time) (*rate.Reservation, time.Duration) {
	if lim == nil {
		return nil, 0
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return nil, math.MaxInt64 // not reached: every burst is at least 1
	}
	return r, r.DelayFrom(now)
}

// sessionLimiter is k's token bucket: its setting's, else one of the
// default limit, made on first use. g.mu held.
func (g *Gate) sessionLimiter(k Key, now time.Time) *rate.Limiter {
	if lim := g.limits[k]; lim != nil {
		return lim
	}
	if g.session.Rate <= 0 {
		return nil
	}
	lim := g.session.limiter(now)
	g.limits[k.clone()] = lim
	return lim
}

// clone is k with strings of its own: a session may point into a
// fetched record.
func (k Key) clone() Key {
	return Key{Topic: strings.Clone(k.Topic), Session: strings.Clone(k.Session)}
}

// keep keeps wake under id for k in m. g.mu held.
func (g *Gate) keep(m map[Key]map[any]func(), k Key, id any, wake func()) {
	ws := m[k]
	if ws == nil {
		ws = map[any]func(){}
		m[k.clone()] = ws
	}
	ws[id] = wake
}

// Forget drops the wakes kept under id for k (its lane no longer waits).
func (g *Gate) Forget(k Key, id any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range []map[Key]map[any]func(){g.sleepers, g.rated} {
		if ws := m[k]; ws != nil {
			delete(ws, id)
			if len(ws) == 0 {
				delete(m, k)
			}
		}
	}
}

// Tidy forgets, at now, what costs memory and holds nothing: the default
// limit's buckets of sessions that are full again, and resources with a
// full bucket and no slot held or waited for. The next record of each
// starts a fresh one, as full as the one forgotten.
func (g *Gate) Tidy(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, lim := range g.limits {
		if s := g.settings[k]; s.Rate == 0 && full(lim, now) { // a default bucket
			delete(g.limits, k)
		}
	}
	for name, r := range g.res {
		if r.users == 0 && (r.lim == nil || full(r.lim, now)) {
			delete(g.res, name)
		}
	}
}

func full(lim *rate.Limiter, now time.Time) bool {
	return lim.TokensAt(now) >= float64(lim.Burst())
}

// Snapshot is every setting in force and how many lanes wait for each
// paused session, for Stats.
type Snapshot struct {
	Key
	Setting
	Waiting int
}

// Snapshot returns the settings in force.
func (g *Gate) Snapshot() []Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Snapshot, 0, len(g.settings))
	for k, s := range g.settings {
		out = append(out, Snapshot{Key: k, Setting: s, Waiting: len(g.sleepers[k])})
	}
	return out
}

// Sizes is what the gate holds, for its memory bound: settings, session
// buckets, resources.
func (g *Gate) Sizes() (settings, buckets, resources int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.settings), len(g.limits), len(g.res)
}
