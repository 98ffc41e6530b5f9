package consumer

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
	"github.com/lanesdev/lanes/hashring"
)

// growAdmitLocked reads the placement stamp of a record admitted with
// sequence number seq: a count newer than its topic's teaches the member
// of a change, and during one the record is tracked for the floors (moves:
// it may wait as a moved session). A record with no stamp (another
// client's, or keyless) is tracked with count 0: it never waits, and holds
// every floor until it is done. p.mu held.
func (p *partition) growAdmitLocked(r *kgo.Record, seq uint64) (pl hashring.Placement, moves bool) {
	g := &p.grow
	if g.t == nil {
		return pl, false
	}
	if v := placementOf(r); v != nil && len(r.Key) > 0 {
		pl = g.placement(v)
	}
	if pl.Count > 0 && int64(pl.Count) > g.t.newest.Load() {
		g.g.learn(p.key.topic, []int{pl.Count}, time.Time{}, 0, time.Now()) // lock order: p.mu, then growth.mu
	}
	if !g.track || !g.t.changing.Load() {
		g.fl = nil // no change, or settled: a next one starts its floors afresh
		return pl, false
	}
	if g.fl == nil {
		g.fl = regrow.NewFloors(r.Offset)
	}
	g.fl.Add(seq, r.Offset, pl.Count)
	return pl, pl.Count > 0
}

// placement is the placement header value v says, parsed once for a run
// of records that carry the same value (zero: not lanes' stamp, handled as
// none).
func (g *partGrow) placement(v []byte) hashring.Placement {
	if !bytes.Equal(v, g.lastV) {
		parsed, err := hashring.ParsePlacement(v)
		if err != nil {
			return hashring.Placement{}
		}
		g.lastV, g.lastPl = append(g.lastV[:0], v...), parsed
	}
	return g.lastPl
}

// growMetaLocked is the growth section of p's next commit: its topic's
// history and, during a change, p's floors for the counts after the
// oldest. Outside a change the floors are dropped. p.mu held.
func (p *partition) growMetaLocked(budget int) string {
	g := &p.grow
	if g.t == nil {
		return ""
	}
	h := g.g.history(p.key.topic)
	if !h.Changing() || !g.track {
		g.fl = nil
		if !g.track {
			h = regrow.History{Counts: h.Counts[len(h.Counts)-min(len(h.Counts), 1):]} // no floors: say the newest count only
		}
		return growMeta(h, nil, parkedOld{})
	}
	next := p.tr.Next()
	if g.fl == nil {
		g.fl = regrow.NewFloors(next) // nothing read since the change became known
	}
	wm := p.tr.Watermark()
	floors := make([]int64, 0, len(h.Counts)-1)
	for _, level := range h.Counts[1:] {
		floors = append(floors, g.fl.Floor(level, p.tr.IsDone, wm, next))
	}
	return growMeta(h, floors, p.parkedOldLocked(h.Newest(), min(maxParkedNamed, budget/64)))
}

// parkedOldLocked names the sessions parked on p whose remaining parked
// records include one placed by a count older than newest, with the
// oldest such count: a parked record is out of the floors' way, so a
// session it moved waits for this instead (regrow.Holds.Release). Until
// p's parked set is rebuilt, what the commit p was taken over at named (a
// record parked since is above its offset, where the floors hold waits);
// all of them when they are too many to name. None without parking. p.mu
// held.
func (p *partition) parkedOldLocked(newest, maxNamed int) parkedOld {
	pk := p.pk
	switch {
	case pk == nil || !p.grow.sessions:
		return parkedOld{} // parking off (what was parked stays where it is, unread: parking.md), or no session order to keep
	case !pk.rebuilt:
		return p.grow.fromParkedAt(newest)
	}
	var po parkedOld
	oldest := newest
	for s := range pk.levels {
		head := int64(math.MinInt64) // held with nothing left parked: its records all count
		if h, ok := pk.set.Head(s); ok {
			head = h.SrcOffset
		} else if !pk.set.IsParked(s) {
			delete(pk.levels, s) // unparked
			continue
		}
		if level, ok := pk.levels.oldest(s, head); ok && level < newest {
			po.named = append(po.named, parkedAt{regrow.SessionHash(s), level})
			oldest = min(oldest, level)
		}
	}
	if len(po.named) > maxNamed {
		return parkedOld{all: true, level: oldest}
	}
	slices.SortFunc(po.named, func(a, b parkedAt) int { // the same set says the same: no commit is due for it
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.level, b.level))
	})
	po.named = slices.CompactFunc(po.named, func(a, b parkedAt) bool { return a.hash == b.hash }) // a collision keeps the oldest
	return po
}

// fromParkedAt is what the commit the partition was taken over at named
// parked, for a history whose newest count is newest: all of them, with
// that commit's newest count at the most, when the topic grew again since
// (a session it left unnamed may have records of that count parked).
func (g *partGrow) fromParkedAt(newest int) parkedOld {
	po := g.fromParked
	if g.fromNewest == 0 || newest <= g.fromNewest {
		return po
	}
	level := g.fromNewest
	if po.all {
		level = min(level, po.level)
	}
	for _, x := range po.named {
		level = min(level, x.level)
	}
	return parkedOld{all: true, level: level}
}

// movedWaiting marks the record seq as waiting as a moved session (or no
// longer): the stall watch leaves its partition alone meanwhile.
func (p *partition) movedWaiting(seq uint64, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.grow.waiting == nil {
			p.grow.waiting = map[uint64]struct{}{}
		}
		p.grow.waiting[seq] = struct{}{}
		return
	}
	delete(p.grow.waiting, seq)
}

// movedHeadLocked reports whether the record holding p's watermark (head)
// waits as a moved session. p.mu held.
func (p *partition) movedHeadLocked(head uint64) bool {
	_, ok := p.grow.waiting[head]
	return ok
}

// growCommitted notes the growth section of the group's commit the member
// takes p over at: a commit that would say the same is not due for it.
//
// Until p's parked set is rebuilt its commits name the parked sessions
// that commit named: all, with no count known, when it said nothing of
// them during a change (an older lanes, or no change then).
func (p *partition) growCommitted(meta string) {
	p.mu.Lock()
	p.grow.committed = growSection(meta)
	p.grow.fromParked, p.grow.fromNewest = parkedOld{all: true}, 0
	if gc, ok := splitGrowMeta(meta); ok && len(gc.floors) > 0 {
		p.grow.fromParked, p.grow.fromNewest = gc.parked, gc.hist.Newest()
	}
	p.mu.Unlock()
}
