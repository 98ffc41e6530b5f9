package offsets

// Tracker follows the offsets of one partition from fetch to done and yields
// the contiguous watermark: the offset to commit, i.e. the lowest fetched
// offset that is not done yet, or one past the newest fetched offset when
// everything fetched is done.
//
// Records of a partition are fetched in increasing offset order, possibly
// with gaps (compaction, aborted transactions; transaction markers arrive
// as control records, done at once). The tracker keeps one slot
// per fetched record in a ring buffer, from the oldest unfinished record to
// the newest fetched one; offsets that were never fetched have no slot, so
// they cannot hold the watermark back. Each fetched record gets a sequence
// number (its slot), which makes marking done O(1); advancing the head past
// finished slots is O(1) amortized. Memory is proportional to the number of
// records between the watermark and the newest fetch.
//
// A tracker is not safe for concurrent use; its partition's mutex guards it.
type Tracker struct {
	slots []slot // ring buffer, len is a power of two
	head  uint64 // sequence number of the oldest slot held
	tail  uint64 // sequence number the next fetched record gets
	next  int64  // one past the newest fetched offset; -1 before any fetch
	start int64  // offset to commit before any fetch (the assigned position); -1 if unknown
	// version counts changes (fetches and dones), so a commit can tell in
	// O(1) that nothing moved since the last one.
	version uint64
}

type slot struct {
	offset int64
	done   bool
	gone   bool // retired by a truncation: done, but not a completed record
}

// NewTracker returns an empty tracker with no start position.
func NewTracker() Tracker {
	return Tracker{slots: make([]slot, 64), next: -1, start: -1}
}

// SetStart sets the offset to commit before any fetch: the position the
// partition was assigned at.
func (t *Tracker) SetStart(offset int64) { t.start = offset }

// Version counts the changes (fetches and dones) so far, so a commit can
// tell in O(1) that nothing moved since the last one.
func (t *Tracker) Version() uint64 { return t.version }

// Touch counts a change the tracker cannot see (the partition's park
// position moved, a start position became due), so the next commit is
// not taken for one that says nothing new.
func (t *Tracker) Touch() { t.version++ }

// NothingFetched reports whether no record was fetched yet.
func (t *Tracker) NothingFetched() bool { return t.next < 0 }

// Fetched records a newly fetched offset and returns its sequence number,
// to be passed to Done. Offsets arrive in increasing order. An offset at or
// below the newest one means the log was truncated (an unclean leader
// election made the broker reuse offsets): the records fetched at or above
// it are gone from the log, so their slots are retired (count as done, are
// never reported as completed) and the reused offsets are tracked, and
// handled, as the new records they are. cut reports such a truncation.
func (t *Tracker) Fetched(offset int64) (seq uint64, cut bool) {
	if t.next >= 0 && offset < t.next {
		t.truncate(offset)
		cut = true
	}
	if t.tail-t.head == uint64(len(t.slots)) {
		t.grow()
	}
	seq = t.tail
	t.slots[seq&uint64(len(t.slots)-1)] = slot{offset: offset}
	t.tail++
	t.next = offset + 1
	t.version++
	return seq, cut
}

// truncate retires every slot at or above offset.
func (t *Tracker) truncate(offset int64) {
	mask := uint64(len(t.slots) - 1)
	for s := t.head; s < t.tail; s++ {
		if sl := &t.slots[s&mask]; sl.offset >= offset {
			sl.done, sl.gone = true, true
		}
	}
	t.advance()
}

// Done marks the record with sequence number seq finished and advances the
// head over every finished slot. Marking a sequence number twice, or one
// already below the head, does nothing.
func (t *Tracker) Done(seq uint64) {
	if seq < t.head || seq >= t.tail {
		return
	}
	mask := uint64(len(t.slots) - 1)
	if t.slots[seq&mask].done {
		return
	}
	t.slots[seq&mask].done = true
	t.version++
	t.advance()
}

// advance moves the head over finished slots.
func (t *Tracker) advance() {
	mask := uint64(len(t.slots) - 1)
	for t.head < t.tail && t.slots[t.head&mask].done {
		t.head++
	}
}

// IsDone reports whether the record with sequence number seq is finished.
func (t *Tracker) IsDone(seq uint64) bool {
	return seq < t.head || (seq < t.tail && t.slots[seq&uint64(len(t.slots)-1)].done)
}

// Watermark returns the offset to commit (the next offset to read), or -1
// when nothing was fetched and no start position is known.
func (t *Tracker) Watermark() int64 {
	if t.head < t.tail {
		return t.slots[t.head&uint64(len(t.slots)-1)].offset
	}
	if t.next >= 0 {
		return t.next
	}
	return t.start
}

// Next returns the offset after the newest fetched record: the next one
// read (the start position before any fetch; -1 if unknown).
func (t *Tracker) Next() int64 {
	if t.next >= 0 {
		return t.next
	}
	return t.start
}

// Pending returns how many fetched records are not yet done or are done
// above an unfinished one: the records the watermark is waiting on.
func (t *Tracker) Pending() int { return int(t.tail - t.head) }

// HeldBy returns the offset holding the watermark back and whether there is
// one.
func (t *Tracker) HeldBy() (int64, bool) {
	if t.head == t.tail {
		return 0, false
	}
	return t.slots[t.head&uint64(len(t.slots)-1)].offset, true
}

// Head returns the sequence number of the record holding the watermark
// back, and whether there is one.
func (t *Tracker) Head() (seq uint64, ok bool) { return t.head, t.head < t.tail }

// DoneAbove calls fn, in increasing order, with every finished offset above
// the watermark. It is O(pending) and used only at commit time.
func (t *Tracker) DoneAbove(fn func(offset int64)) {
	mask := uint64(len(t.slots) - 1)
	for s := t.head; s < t.tail; s++ {
		if sl := t.slots[s&mask]; sl.done && !sl.gone {
			fn(sl.offset)
		}
	}
}

func (t *Tracker) grow() {
	bigger := make([]slot, 2*len(t.slots))
	mask := uint64(len(t.slots) - 1)
	nmask := uint64(len(bigger) - 1)
	for s := t.head; s < t.tail; s++ {
		bigger[s&nmask] = t.slots[s&mask]
	}
	t.slots = bigger
}
