package consumer

import "time"

// A partition's failing dead-letter writes (under partition.mu): a record
// whose copy could not be written holds its partition, and is reported in
// PartitionStats and Health while it does; a write the revoke or shutdown
// cut is no failure, only named by the shutdown as unfinished.

// forgetDLQLocked drops the failed dead-letter writes of records that are
// done, by whatever path: a failure is reported only while its record
// holds the partition. Called wherever records become done. p.mu held.
func (p *partition) forgetDLQLocked() {
	if len(p.dlqFails) == 0 {
		return // the common case, checked first: ranging over an empty map is not free
	}
	for seq := range p.dlqFails {
		if p.tr.IsDone(seq) {
			delete(p.dlqFails, seq)
		}
	}
}

// deadLetterBlocked reports the record held here because its dead-letter
// copy could not be written: its offset, since when, and the last error.
func (p *partition) deadLetterBlocked() (offset int64, since time.Time, err string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.dlqFails { // the lowest offset: the one nearest the watermark
		if !f.cut && (!ok || f.offset < offset) {
			offset, since, err, ok = f.offset, f.at, f.err, true
		}
	}
	return offset, since, err, ok
}

// dlqFailure records that the dead-letter copy of the record seq (at
// offset) could not be written; it reports whether this is the first
// failure for it. A record done meanwhile (handled, skipped, its copy
// written by the other writer, retired by a truncation) holds nothing:
// nothing is recorded.
func (p *partition) dlqFailure(seq uint64, offset int64, err error, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tr.IsDone(seq) {
		return false
	}
	f, seen := p.dlqFails[seq]
	if !seen {
		f = dlqFail{offset: offset, at: now}
	}
	f.err, f.cut = err.Error(), false // a cut write that then failed is failing
	if p.dlqFails == nil {
		p.dlqFails = map[uint64]dlqFail{}
	}
	p.dlqFails[seq] = f
	return !seen
}

// dlqBlocked marks the failing dead-letter write of the record seq as
// failed with an error that is not retriable, and reports whether this
// is its first such mark (after dlqFailure recorded it): whatever the
// failures before it were, the record is then counted blocked once.
func (p *partition) dlqBlocked(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, failing := p.dlqFails[seq]
	if !failing || f.blocked {
		return false
	}
	f.blocked = true
	p.dlqFails[seq] = f
	return true
}

// dlqCut records that the dead-letter write of the record seq (at offset)
// was ended by the partition's revoke or shutdown before the broker
// answered: not a failing write (Stats and Health do not report it), but
// a record left undone, which the shutdown names. A failure recorded
// before stays reported.
func (p *partition) dlqCut(seq uint64, offset int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, failing := p.dlqFails[seq]; failing || p.tr.IsDone(seq) {
		return
	}
	if p.dlqFails == nil {
		p.dlqFails = map[uint64]dlqFail{}
	}
	p.dlqFails[seq] = dlqFail{offset: offset, at: now, cut: true}
}

// deadLetterCut reports the lowest offset whose dead-letter write the
// revoke or shutdown ended before the broker answered.
func (p *partition) deadLetterCut() (offset int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.dlqFails {
		if f.cut && (!ok || f.offset < offset) {
			offset, ok = f.offset, true
		}
	}
	return offset, ok
}
