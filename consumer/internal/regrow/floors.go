package regrow

import (
	"cmp"
	"slices"
)

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
// Floors is made when the member takes it, at its start position, so it
// knows every record it reads. Not safe for concurrent use: its
// partition's lock guards it.
type Floors struct {
	from int64
	recs []pend // ascending offsets; the head trimmed once done
}

type pend struct {
	off   int64
	count int
	done  bool
}

// NewFloors starts tracking a partition whose next record read is at
// from.
func NewFloors(from int64) *Floors { return &Floors{from: from} }

// Add notes a stamped record read at off with its stamp's count (records
// are added in offset order; an unstamped record need not be: no session
// of a producer that does not stamp waits).
func (f *Floors) Add(off int64, count int) {
	if off >= f.from && (len(f.recs) == 0 || off > f.recs[len(f.recs)-1].off) {
		f.recs = append(f.recs, pend{off: off, count: count})
	}
}

// Done notes that the record at off is out of its session's way: handled,
// dead-lettered or parked.
func (f *Floors) Done(off int64) {
	i, ok := slices.BinarySearchFunc(f.recs, off, func(p pend, o int64) int { return cmp.Compare(p.off, o) })
	if !ok {
		return
	}
	f.recs[i].done = true
	for len(f.recs) > 0 && f.recs[0].done {
		f.recs = f.recs[1:]
	}
	if len(f.recs) == 0 {
		f.recs = nil // let the array go
	}
}

// Floor is the floor for level, with watermark the partition's lowest
// offset not handled and next the offset it reads next.
func (f *Floors) Floor(level int, watermark, next int64) int64 {
	if watermark < f.from {
		return watermark
	}
	for _, p := range f.recs {
		if !p.done && p.count < level {
			return p.off
		}
	}
	return next
}

// Len is the number of stamped records not done.
func (f *Floors) Len() int {
	n := 0
	for _, p := range f.recs {
		if !p.done {
			n++
		}
	}
	return n
}
