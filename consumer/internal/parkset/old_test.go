package parkset

// The parked set before sessions kept their floor in their entry (a
// separate floor map; an entry only while parked) and before times were
// kept as durations: the reference of TestParkSetDifferential.

import "time"

type oldParkSet struct {
	rules    Rules
	sessions map[string]*oldParkedSession
	records  int // parked records over all sessions
	// floor is, per session seen in the park partition since the
	// committed park position (by the rebuild or by this assignment's
	// writes), the highest source offset of it that was parked or
	// released: every record of the session at or below it was done by a
	// lane before (handled, parked or dead-lettered), so a source record
	// delivered again at or below it is done at once. Cleared by
	// forgetBelow once the committed source watermark passes it. The park
	// entry that set it is needed by a rebuild until then, so the park
	// position stays at or below it.
	floor map[string]floorMark
	end   int64 // one past the highest park offset seen; 0 before any
	// w are the identity rules, shared with the parked set (the
	// differential test compares the sessions' bookkeeping; the park model
	// test puts the identity rules to the test).
	w writers
}

// oldParkedSession is one parked session: its parked records in source order,
// when its head may be retried, and whether a retry of it is under way.
type oldParkedSession struct {
	recs       []oldParkedRecord
	notBefore  time.Time
	retrying   bool  // a retry of the head is queued in its lane or running
	held       bool  // budget spent with the hold policy: not retried
	holdOffset int64 // park offset of the hold marker; needed until released
}

// oldParkedRecord is one parked record: where its copy is (park offset), where
// it came from (source offset), its failed retries from the park and when
// it was parked.
type oldParkedRecord struct {
	parkOffset int64
	srcOffset  int64
	retries    int
	parkedAt   time.Time
}

func newOldParkSet(r Rules) *oldParkSet {
	return &oldParkSet{rules: r, sessions: map[string]*oldParkedSession{}, floor: map[string]floorMark{}}
}

// isParked reports whether session s is parked: its next record is to be
// forwarded to the park partition, not handled.
func (ps *oldParkSet) isParked(s string) bool { return ps.sessions[s] != nil }

// seen reports whether the record of session s at source offset off was
// done before (parked, or handled before a later record of s was parked):
// a record delivered again after a crash or a handover, done at once.
func (ps *oldParkSet) seen(s string, off int64) bool {
	f, ok := ps.floor[s]
	return ok && off <= f.src
}

// add records that the copy of session s's source record srcOff is in the
// park partition at parkOff (acknowledged). The session is parked if it
// was not; its head is due delay after now. It reports false for a copy
// already known (a duplicate write): nothing changes.
func (ps *oldParkSet) add(s string, parkOff, srcOff int64, now time.Time) bool {
	ps.end = max(ps.end, parkOff+1)
	if ps.seen(s, srcOff) {
		return false
	}
	ps.floor[s] = floorMark{srcOff, parkOff}
	ss := ps.sessions[s]
	if ss == nil {
		ss = &oldParkedSession{notBefore: now.Add(ps.rules.Delay), holdOffset: -1}
		ps.sessions[s] = ss
	}
	ss.recs = append(ss.recs, oldParkedRecord{parkOffset: parkOff, srcOffset: srcOff, parkedAt: now})
	ps.records++
	return true
}

// due returns the sessions whose head may be retried at now and marks each
// as retrying: a retry of its head is to be queued in its lane. Held
// sessions and those with a retry under way are not due.
func (ps *oldParkSet) due(now time.Time) []string {
	var out []string
	for s, ss := range ps.sessions {
		if !ss.retrying && !ss.held && len(ss.recs) > 0 && !now.Before(ss.notBefore) {
			ss.retrying = true
			out = append(out, s)
		}
	}
	return out
}

// dueNow marks session s as retrying and reports true when its head may
// be retried at now (as due does for every session).
func (ps *oldParkSet) dueNow(s string, now time.Time) bool {
	ss := ps.sessions[s]
	if ss == nil || ss.retrying || ss.held || len(ss.recs) == 0 || now.Before(ss.notBefore) {
		return false
	}
	ss.retrying = true
	return true
}

// head returns the parked head of session s: the record to retry.
func (ps *oldParkSet) head(s string) (oldParkedRecord, bool) {
	ss := ps.sessions[s]
	if ss == nil || len(ss.recs) == 0 {
		return oldParkedRecord{}, false
	}
	return ss.recs[0], true
}

// retryAbandoned ends a retry of s's head that was not made (its
// partition fenced, or its copy unreadable for now): the head is due again.
func (ps *oldParkSet) retryAbandoned(s string) {
	if ss := ps.sessions[s]; ss != nil {
		ss.retrying = false
	}
}

// failed records that the retry of s's head failed. With budget left the
// head is due after the park backoff; deadLetter is true when the budget
// is spent: the caller writes the head to the DLQ and, once acknowledged,
// a marker through its source offset: a hold marker (held) when
// rules.Hold, else a done marker (done). The head stays retrying, so not
// due, meanwhile.
func (ps *oldParkSet) failed(s string, now time.Time) (deadLetter bool) {
	ss := ps.sessions[s]
	if ss == nil || len(ss.recs) == 0 {
		return false
	}
	h := &ss.recs[0]
	h.retries++
	if h.retries >= ps.rules.MaxAttempts {
		return true
	}
	ss.retrying = false
	ss.notBefore = now.Add(ps.backoff(h.retries))
	return false
}

// backoff is the delay before the retry after n failed ones: delay
// doubling, at most maxDelay.
func (ps *oldParkSet) backoff(n int) time.Duration {
	d := ps.rules.Delay
	for i := 0; i < n && d < ps.rules.MaxDelay; i++ {
		d *= 2
	}
	return min(d, ps.rules.MaxDelay)
}

func (ps *oldParkSet) dropHead(ss *oldParkedSession) {
	ss.recs[0] = oldParkedRecord{}
	ss.recs = ss.recs[1:]
	if len(ss.recs) == 0 {
		ss.recs = nil
	}
	ps.records--
}

// dropThrough drops s's records at or below source offset through, in
// the order they were parked, stopping at one whose source offset is
// below the one dropped before it (parked after a log truncation, at a
// reused offset: a new record), and raises its floor to it (set by the
// marker at parkOff).
func (ps *oldParkSet) dropThrough(s string, ss *oldParkedSession, through, parkOff int64) {
	if f, ok := ps.floor[s]; !ok || f.src <= through {
		ps.floor[s] = floorMark{through, parkOff}
	}
	last := int64(-1)
	for ss != nil && len(ss.recs) > 0 && ss.recs[0].srcOffset <= through && ss.recs[0].srcOffset >= last {
		last = ss.recs[0].srcOffset
		ps.dropHead(ss)
	}
}

// done records a done marker of s through source offset through, at park
// offset parkOff (acknowledged, or read by the rebuild): s's parked records
// at or below it are done (handled, or dead-lettered with the release
// policy), a hold is lifted, the next head is due at once, and with none
// left the session is unparked: its next source record is handled.
func (ps *oldParkSet) done(s string, through, parkOff int64, now time.Time) {
	ps.end = max(ps.end, parkOff+1)
	ss := ps.sessions[s]
	ps.dropThrough(s, ss, through, parkOff)
	if ss == nil {
		return
	}
	ss.held, ss.holdOffset, ss.retrying, ss.notBefore = false, -1, false, now
	if len(ss.recs) == 0 {
		delete(ps.sessions, s)
	}
}

// held records a hold marker of s through source offset through (its
// dead-lettered head), at park offset parkOff: the session stays parked,
// not retried, its later records forwarded behind it, until a done marker
// or release.
func (ps *oldParkSet) held(s string, through, parkOff int64) {
	ps.end = max(ps.end, parkOff+1)
	ss := ps.sessions[s]
	if ss == nil {
		ss = &oldParkedSession{}
		ps.sessions[s] = ss
	}
	ps.dropThrough(s, ss, through, parkOff)
	ss.held, ss.retrying, ss.holdOffset = true, false, parkOff
}

// release lets a held session be retried again at once (an operator's
// decision); it reports whether s was held. With nothing parked the
// session is unparked.
func (ps *oldParkSet) release(s string, now time.Time) bool {
	ss := ps.sessions[s]
	if ss == nil || !ss.held {
		return false
	}
	ss.held, ss.holdOffset, ss.notBefore = false, -1, now
	if len(ss.recs) == 0 {
		delete(ps.sessions, s)
	}
	return true
}

// replay applies the park partition's entry e, at park offset off, read
// by the rebuild in offset order from the committed park position. It
// reports false for an entry written by an owner fenced before it (a
// write that landed after the partition moved on): ignored.
func (ps *oldParkSet) replay(off int64, e Entry, now time.Time) bool {
	ps.end = max(ps.end, off+1)
	if !ps.w.admit(off, e) {
		return false
	}
	switch e.Kind {
	case KindFence:
	case KindRecord:
		ps.add(e.Session, off, e.Src, now)
	case KindDone:
		ps.done(e.Session, e.Src, off, now)
	case KindHold:
		ps.held(e.Session, e.Src, off)
	default:
		return false
	}
	return true
}

// begin starts a rebuild at the committed park position pos, with the
// fence in force there.
func (ps *oldParkSet) begin(pos int64, f Fence) {
	ps.end = max(ps.end, pos)
	if f.Off >= 0 {
		ps.w.fences = append(ps.w.fences[:0], f)
	}
}

// position is the park position to commit: the lowest park offset still
// needed (a parked record not done, a hold marker in force, the entry that
// set a floor not yet forgotten), or end when none is.
func (ps *oldParkSet) position() int64 {
	pos := ps.end
	for _, f := range ps.floor {
		pos = min(pos, f.at)
	}
	for _, ss := range ps.sessions {
		if len(ss.recs) > 0 {
			pos = min(pos, ss.recs[0].parkOffset) // the lowest: records are added in park order
		}
		if ss.held && ss.holdOffset >= 0 {
			pos = min(pos, ss.holdOffset)
		}
	}
	return pos
}

// forgetBelow drops the floors no source record can be delivered again
// for: once the committed source watermark wm passes a session's floor.
func (ps *oldParkSet) forgetBelow(wm int64) {
	for s, f := range ps.floor {
		if f.src < wm {
			delete(ps.floor, s)
		}
	}
}

func (ps *oldParkSet) counts(now time.Time) Counts {
	c := Counts{Sessions: len(ps.sessions), Records: ps.records}
	for _, ss := range ps.sessions {
		if ss.held {
			c.Held++
		}
		if len(ss.recs) > 0 {
			c.Oldest = max(c.Oldest, now.Sub(ss.recs[0].parkedAt))
		}
	}
	return c
}
