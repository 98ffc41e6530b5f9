package parkset

import "time"

// What the consumer shows of a parked set: its sessions for InspectParked
// and the parked-session pages, and its counts for Stats.

// Parked is one parked session as the set keeps it, for InspectParked
// and the consumer's tests: whether it is held, its parked records'
// source offsets in order, when its head was parked and its failed
// retries (zero without a head), whether a retry of its head is under
// way and when its head may be retried.
type Parked struct {
	Session   string
	Held      bool
	Offsets   []int64
	Since     time.Time
	Retries   int
	Retrying  bool
	NotBefore time.Time
}

// ParkedSessions returns the parked sessions (not those with only a
// floor), in no order.
func (ps *Set) ParkedSessions() []Parked {
	var out []Parked
	for s, ss := range ps.sessions {
		if !ss.parked() {
			continue
		}
		p := Parked{Session: s, Held: ss.held, Retrying: ss.retrying, NotBefore: ps.at(ss.notBefore)}
		for _, r := range ss.recs {
			p.Offsets = append(p.Offsets, r.SrcOffset)
		}
		if len(ss.recs) > 0 {
			p.Since, p.Retries = ps.at(ss.recs[0].parkedAt), ss.recs[0].Retries
		}
		out = append(out, p)
	}
	return out
}

// Expedite makes session s's head due at once, touching nothing else (a
// retry under way stays so). The consumer never calls it: its tests do,
// to retry a parked head without waiting out its delay.
func (ps *Set) Expedite(s string) {
	if ss := ps.sessions[s]; ss != nil {
		ss.notBefore = 0
	}
}

// Counts is what the consumer's Stats show of a parked set.
type Counts struct {
	Sessions, Records, Held int           // sessions parked, records parked, and of the sessions those held
	Oldest                  time.Duration // age of the oldest parked record
}

// Counts are the set's counts at now.
func (ps *Set) Counts(now time.Time) Counts {
	c := Counts{Records: ps.records}
	for _, ss := range ps.sessions {
		if ss.parked() {
			c.Sessions++
		}
		if ss.held {
			c.Held++
		}
		if len(ss.recs) > 0 {
			c.Oldest = max(c.Oldest, ps.since(now)-ss.recs[0].parkedAt)
		}
	}
	return c
}
