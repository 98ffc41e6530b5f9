package regrow

// Floors is what the owner of a partition tells the group, during a
// change of its topic, of the records it has not handled: for a level (a
// count), the floor is the lowest offset of a record not handled whose
// stamp is older than the level, or, when there is none, the next offset
// it will read. Every record of the partition below the floor stamped
// older than the level is handled. A moved session's record stamped n
// waits on its old partitions' floors for n, not on their committed
// offsets: a record that itself waits (stamped n or newer) never holds a
// floor for n, so waits cannot close a circle through two partitions
// (which Kafka's partitioner makes: it moves keys between old partitions
// too).
//
// Floors tracks the stamped records read since it was made (from on);
// below that it knows nothing of stamps, and every floor stays at or
// below the watermark while the watermark is below from. A partition's
// Floors is made when the member first knows of its topic's change (the
// records it read before are stamped with counts no newer than the oldest
// it knows, so none of them waits), or when it takes the partition during
// one. Not safe for concurrent use: its partition's lock guards it.
type Floors struct {
	from int64
	recs []pend // ascending
}

type pend struct {
	seq   uint64 // the partition's sequence number of the record
	off   int64
	count int
}

// NewFloors starts tracking a partition whose next record read is at
// from.
func NewFloors(from int64) *Floors { return &Floors{from: from} }

// Add notes a record read at off (seq: the partition's sequence number
// for it) with its stamp's count, 0 for a record with no stamp (it never
// waits, and holds every floor until done: it may be an older record of a
// session whose producer began stamping since). Records are added in the
// order read.
func (f *Floors) Add(seq uint64, off int64, count int) {
	if off >= f.from {
		f.recs = append(f.recs, pend{seq: seq, off: off, count: count})
	}
}

// Floor is the floor for level: done reports whether a record (by
// sequence number) is out of its session's way (handled or
// dead-lettered), watermark is the partition's lowest offset not done
// and next the offset it reads next. Records done at the head are
// forgotten.
func (f *Floors) Floor(level int, done func(seq uint64) bool, watermark, next int64) int64 {
	for len(f.recs) > 0 && done(f.recs[0].seq) {
		f.recs = f.recs[1:]
	}
	if len(f.recs) == 0 {
		f.recs = nil // let the array go
	}
	if watermark < f.from {
		return watermark
	}
	for _, p := range f.recs {
		if p.count < level && !done(p.seq) {
			return p.off
		}
	}
	return next
}
