package parkset

import "time"

// Set is the parked set of one source partition: the sessions whose
// records wait in its park partition, and every rule over them
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md). The lane
// of a session asks it what to do with the session's next record or retry
// and reports what came of it; the park loop asks it which parked heads are
// due. Time is passed in.
//
// It is not safe for concurrent use: its partition's mutex guards it, so
// that a record's park copy is added and its source record marked done in
// one step, and a commit reads the source watermark and the park position
// as one snapshot.
type Set struct {
	rules Rules
	// sessions has an entry per session parked, and per session with a
	// floor (parkedSession.floor) after it was unparked.
	sessions map[string]*parkedSession
	records  int   // parked records over all sessions
	end      int64 // one past the highest park offset seen; 0 before any
	// base is the time the set's times are kept from (as durations: a
	// parked session's entry stays small).
	base time.Time
	// cut is the offset the source log was last truncated at (Truncated),
	// and oldEnd the park end then: a copy parked below oldEnd is of the
	// log before the cut. cut is -1 before any truncation.
	cut, oldEnd int64
	// w are the identity rules (entry.go): which entries of the park
	// partition are this group's own, and the fence in force, whose park
	// offset the current owner's entries carry (Epoch).
	w writers
}

// floorMark is a session's floor and the park offset of the entry (copy
// or marker) that set it.
type floorMark struct{ src, at int64 }

// Rules are the parts of the consumer's ParkPolicy the parked set
// applies.
type Rules struct {
	Delay, MaxDelay time.Duration // the park delay, and the most its backoff doubles to
	MaxAttempts     int           // failed retries of a parked head before it is dead-lettered
	Hold            bool          // budget spent: hold the session (true) or release it
}

// parkedSession is one session of a parked set: while parked, its parked
// records in source order, when its head may be retried, and whether a
// retry of it is under way; and its floor, which outlives the parking.
//
// The floor is, for a session seen in the park partition since the
// committed park position (by the rebuild or by this assignment's
// writes), the highest source offset of it that was parked or released:
// every record of the session at or below it was done by a lane before
// (handled, parked or dead-lettered), so a source record delivered again
// at or below it is done at once. Cleared by ForgetBelow once the
// committed source watermark passes it. The park entry that set it is
// needed by a rebuild until then, so the park position stays at or below
// it.
//
// 64 bytes and one Record per parked record
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#limits).
type parkedSession struct {
	recs       []Record
	notBefore  time.Duration // since the set's base
	holdOffset int64         // park offset of the hold marker; needed until released
	floor      floorMark     // when hasFloor
	retrying   bool          // a retry of the head is queued in its lane or running
	held       bool          // budget spent with the hold policy: not retried
	hasFloor   bool
}

// parked reports whether the session is parked: records of it parked,
// or held.
func (ss *parkedSession) parked() bool { return len(ss.recs) > 0 || ss.held }

// Record is one parked record: where its copy is (park offset), where
// it came from (source offset), its failed retries from the park and when
// it was parked. Its content stays in the park partition: a retry reads it
// back (the consumer's parkIO.readAt), so a parked session costs only this
// bookkeeping.
type Record struct {
	ParkOffset int64
	SrcOffset  int64
	parkedAt   time.Duration // since the set's base
	Retries    int
}

// New is the parked set of a partition consumed by group.
func New(r Rules, group string) *Set {
	return &Set{rules: r, sessions: map[string]*parkedSession{}, base: time.Now(), w: writers{group: group}, cut: -1}
}

// since is t as the set keeps it: the time from its base.
func (ps *Set) since(t time.Time) time.Duration { return t.Sub(ps.base) }

// at is the time the set keeps as d.
func (ps *Set) at(d time.Duration) time.Time { return ps.base.Add(d) }

// IsParked reports whether session s is parked: its next record is to be
// forwarded to the park partition, not handled.
func (ps *Set) IsParked(s string) bool {
	ss := ps.sessions[s]
	return ss != nil && ss.parked()
}

// IsHeld reports whether session s is held: its budget spent with the
// hold policy, not retried until a done marker or a release.
func (ps *Set) IsHeld(s string) bool {
	ss := ps.sessions[s]
	return ss != nil && ss.held
}

// entry returns session s's entry, made when it has none.
func (ps *Set) entry(s string) *parkedSession {
	ss := ps.sessions[s]
	if ss == nil {
		ss = &parkedSession{holdOffset: -1}
		ps.sessions[s] = ss
	}
	return ss
}

// tidy drops session s's entry once it is neither parked nor has a floor.
func (ps *Set) tidy(s string, ss *parkedSession) {
	if !ss.parked() && !ss.hasFloor {
		delete(ps.sessions, s)
	}
}

// Seen reports whether the record of session s at source offset off was
// done before (parked, or handled before a later record of s was parked):
// a record delivered again after a crash or a handover, done at once.
func (ps *Set) Seen(s string, off int64) bool {
	ss := ps.sessions[s]
	return ss != nil && ss.hasFloor && off <= ss.floor.src
}

// Add records that the copy of session s's source record srcOff is in the
// park partition at parkOff (acknowledged). The session is parked if it
// was not; its head is due delay after now. It reports false for a copy
// already known (a duplicate write): nothing changes.
func (ps *Set) Add(s string, parkOff, srcOff int64, now time.Time) bool {
	ps.end = max(ps.end, parkOff+1)
	if ps.Seen(s, srcOff) {
		return false
	}
	ss := ps.entry(s)
	if !ss.parked() {
		ss.notBefore, ss.retrying = ps.since(now.Add(ps.rules.Delay)), false
	}
	ss.floor, ss.hasFloor = floorMark{srcOff, parkOff}, true
	ss.recs = append(ss.recs, Record{ParkOffset: parkOff, SrcOffset: srcOff, parkedAt: ps.since(now)})
	ps.records++
	return true
}

// Needs reports whether the copy at park offset off is a parked record of
// session s still waiting for a retry.
func (ps *Set) Needs(s []byte, off int64) bool {
	ss := ps.sessions[string(s)]
	if ss == nil {
		return false
	}
	for _, r := range ss.recs {
		if r.ParkOffset == off {
			return true
		}
	}
	return false
}

// Due returns the sessions whose head may be retried at now and marks each
// as retrying: a retry of its head is to be queued in its lane. Held
// sessions and those with a retry under way are not due.
func (ps *Set) Due(now time.Time) []string { return ps.DueExcept(now, nil) }

// DueExcept is Due for the sessions skip does not name (nil: none): a
// session paused by an operator is not retried, nor marked retrying.
func (ps *Set) DueExcept(now time.Time, skip func(string) bool) []string {
	var out []string
	at := ps.since(now)
	for s, ss := range ps.sessions {
		if !ss.retrying && !ss.held && len(ss.recs) > 0 && at >= ss.notBefore && (skip == nil || !skip(s)) {
			ss.retrying = true
			out = append(out, s)
		}
	}
	return out
}

// DueNow marks session s as retrying and reports true when its head may
// be retried at now (as Due does for every session).
func (ps *Set) DueNow(s string, now time.Time) bool {
	ss := ps.sessions[s]
	if ss == nil || ss.retrying || ss.held || len(ss.recs) == 0 || ps.since(now) < ss.notBefore {
		return false
	}
	ss.retrying = true
	return true
}

// Head returns the parked head of session s: the record to retry.
func (ps *Set) Head(s string) (Record, bool) {
	ss := ps.sessions[s]
	if ss == nil || len(ss.recs) == 0 {
		return Record{}, false
	}
	return ss.recs[0], true
}

// RetryAbandoned ends a retry of s's head that was not made (its
// partition fenced, or its copy unreadable for now): the head is due again.
func (ps *Set) RetryAbandoned(s string) {
	if ss := ps.sessions[s]; ss != nil {
		ss.retrying = false
	}
}

// RetryLater ends a retry of s's head that could not be made for now (its
// copy not read back): the head is due again after the park delay, its
// budget untouched.
func (ps *Set) RetryLater(s string, now time.Time) {
	if ss := ps.sessions[s]; ss != nil {
		ss.retrying = false
		ss.notBefore = ps.since(now.Add(ps.rules.Delay))
	}
}

// Failed records that the retry of s's head failed. With budget left the
// head is due after the park backoff; deadLetter is true when the budget
// is spent: the caller writes the head to the DLQ and, once acknowledged,
// a marker through its source offset: a hold marker (Held) when
// Rules.Hold, else a done marker (Done). The head stays retrying, so not
// due, meanwhile.
func (ps *Set) Failed(s string, now time.Time) (deadLetter bool) {
	ss := ps.sessions[s]
	if ss == nil || len(ss.recs) == 0 {
		return false
	}
	h := &ss.recs[0]
	h.Retries++
	if h.Retries >= ps.rules.MaxAttempts {
		return true
	}
	ss.retrying = false
	ss.notBefore = ps.since(now.Add(ps.backoff(h.Retries)))
	return false
}

// attempted records an attempt marker of s, at park offset parkOff,
// written at: the retry of its head at source offset src had failed
// retries times by then. When that head is still s's head it takes the
// count (a rebuild keeps the budget spent) and is due the backoff after.
func (ps *Set) attempted(s string, src int64, retries int, parkOff int64, at time.Time) {
	ps.end = max(ps.end, parkOff+1)
	ss := ps.sessions[s]
	if ss == nil || len(ss.recs) == 0 || ss.recs[0].SrcOffset != src || ss.recs[0].Retries >= retries {
		return
	}
	ss.recs[0].Retries = retries
	ss.notBefore = ps.since(at.Add(ps.backoff(retries)))
}

// backoff is the delay before the retry after n failed ones: Delay
// doubling, at most MaxDelay.
func (ps *Set) backoff(n int) time.Duration {
	d := ps.rules.Delay
	for i := 0; i < n && d < ps.rules.MaxDelay; i++ {
		d *= 2
	}
	return min(d, ps.rules.MaxDelay)
}

func (ps *Set) dropHead(ss *parkedSession) {
	ss.recs[0] = Record{}
	ss.recs = ss.recs[1:]
	if len(ss.recs) == 0 {
		ss.recs = nil
	}
	ps.records--
}

// dropThrough drops the session's records at or below source offset
// through, in the order they were parked, and raises its floor to it (set
// by the marker at parkOff). It stops at a record whose source offset is
// below the one dropped before it: parked after a log truncation
// (Truncated), at a reused offset, it is a new record, not done. After a
// truncation, a marker dropping an old copy, or nothing, raises the floor
// no higher than below the cut: the new log's records there are not done.
func (ps *Set) dropThrough(ss *parkedSession, through, parkOff int64) {
	last, lastPark := int64(-1), int64(-1)
	for len(ss.recs) > 0 && ss.recs[0].SrcOffset <= through && ss.recs[0].SrcOffset >= last {
		last, lastPark = ss.recs[0].SrcOffset, ss.recs[0].ParkOffset
		ps.dropHead(ss)
	}
	floor := through
	if ps.cut >= 0 && lastPark < ps.oldEnd { // the old log's copy, or nothing (lastPark -1)
		floor = min(floor, ps.cut-1)
	}
	if !ss.hasFloor || ss.floor.src <= floor {
		ss.floor, ss.hasFloor = floorMark{floor, parkOff}, true
	}
}

// Truncated tells the set that the source log was truncated at offset
// at (an unclean leader election): records from at on are new ones, at
// offsets reused. A floor at or above at described the old log: it falls
// to at-1, so that no new record is taken for one done before (the entry
// that set it stays needed until the commit passes it), and a marker of a
// copy of the old log raises it no higher (dropThrough). Records parked
// from the old log stay parked, and are retried.
func (ps *Set) Truncated(at int64) {
	ps.cut, ps.oldEnd = at, ps.end
	for _, ss := range ps.sessions {
		if ss.hasFloor && ss.floor.src >= at {
			ss.floor.src = at - 1
		}
	}
}

// Done records a done marker of s through source offset through, at park
// offset parkOff (acknowledged, or read by the rebuild): s's parked records
// at or below it are done (handled, or dead-lettered with the release
// policy), a hold is lifted, the next head is due at once, and with none
// left the session is unparked: its next source record is handled.
func (ps *Set) Done(s string, through, parkOff int64, now time.Time) {
	ps.end = max(ps.end, parkOff+1)
	ss := ps.entry(s)
	ps.dropThrough(ss, through, parkOff)
	ss.held, ss.holdOffset, ss.retrying, ss.notBefore = false, -1, false, ps.since(now)
}

// Held records a hold marker of s through source offset through (its
// dead-lettered head), at park offset parkOff: the session stays parked,
// not retried, its later records forwarded behind it, until a done marker
// or release.
func (ps *Set) Held(s string, through, parkOff int64) {
	ps.end = max(ps.end, parkOff+1)
	ss := ps.entry(s)
	ps.dropThrough(ss, through, parkOff)
	ss.held, ss.retrying, ss.holdOffset = true, false, parkOff
}

// Hurry makes s's parked head due at now when it is due later (its
// session was resumed by an operator after a pause): a held session stays
// held.
func (ps *Set) Hurry(s string, now time.Time) {
	if ss := ps.sessions[s]; ss != nil && !ss.held {
		ss.notBefore = min(ss.notBefore, ps.since(now))
	}
}

// Release lets a held session be retried again at once (an operator's
// decision); it reports whether s was held. With nothing parked the
// session is unparked.
func (ps *Set) Release(s string, now time.Time) bool {
	ss := ps.sessions[s]
	if ss == nil || !ss.held {
		return false
	}
	ss.held, ss.holdOffset, ss.notBefore = false, -1, ps.since(now)
	ps.tidy(s, ss)
	return true
}

// Position is the park position to commit: the lowest park offset still
// needed (a parked record not done, a hold marker in force, the entry that
// set a floor not yet forgotten), or end when none is.
func (ps *Set) Position() int64 {
	pos := ps.end
	for _, ss := range ps.sessions {
		if ss.hasFloor {
			pos = min(pos, ss.floor.at)
		}
		if len(ss.recs) > 0 {
			pos = min(pos, ss.recs[0].ParkOffset) // the lowest: records are added in park order
		}
		if ss.held && ss.holdOffset >= 0 {
			pos = min(pos, ss.holdOffset)
		}
	}
	return pos
}

// ForgetBelow drops the floors no source record can be delivered again
// for: once the committed source watermark wm passes a session's floor.
func (ps *Set) ForgetBelow(wm int64) {
	for s, ss := range ps.sessions {
		if ss.hasFloor && ss.floor.src < wm {
			ss.hasFloor = false
			ps.tidy(s, ss)
		}
	}
}

// End is one past the highest park offset the set has seen; 0 before
// any.
func (ps *Set) End() int64 { return ps.end }
