package consumer

import (
	"math/bits"
	"strconv"
	"unsafe"

	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dispatch routes one poll's records, in partition order, to their lanes.
// It runs on the poll loop, between PollRecords and AllowRebalance, so no
// rebalance can interleave with it.
func (c *Consumer) dispatch(fs kgo.Fetches) {
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		p := c.own.get(partKey{ftp.Topic, ftp.Partition})
		if p == nil {
			return // not ours (any more): the owner fetches it again
		}
		p.lso.Store(ftp.LastStableOffset + 1) // +1: 0 says none yet
		p.admitMu.Lock()
		defer p.admitMu.Unlock()
		if !p.hold(ftp.Records, ftp.HighWatermark) {
			c.handOut(p, ftp.Records, ftp.HighWatermark)
		}
	})
	c.flow.apply()
}

// drainStash hands a partition's stashed records to lanes, in chunks of
// MaxPollRecords, until the stash is empty or the partition is full again.
// The flow controller runs it when a full partition frees up.
func (c *Consumer) drainStash(p *partition) {
	p.admitMu.Lock()
	defer p.admitMu.Unlock()
	for {
		recs, hwm := p.unstash(c.cfg.MaxPollRecords)
		if len(recs) == 0 {
			return
		}
		c.handOut(p, recs, hwm)
	}
}

// handOut admits records of p, adds them to their lanes and starts the
// lanes it made, together. p.admitMu held.
func (c *Consumer) handOut(p *partition, recs []*kgo.Record, hwm int64) {
	var fresh []*lane
	ws := c.admit(p, recs, hwm)
	for i := range ws {
		if l := c.shardOf(ws[i].lane).add(&ws[i]); l != nil {
			fresh = append(fresh, l)
		}
	}
	if len(fresh) > 0 {
		c.lanes.startAll(fresh)
	}
}

// admit registers a partition's fetched records with it and returns the
// work to hand to lanes, in offset order, each with its session and lane
// key.
func (c *Consumer) admit(p *partition, recs []*kgo.Record, hwm int64) []work {
	var drop []bool // Filter's verdicts, computed outside the lock; nil: keep all
	if c.cfg.Filter != nil {
		drop = make([]bool, len(recs))
		c.userMu.Lock()
		for i, r := range recs {
			drop[i] = !r.Attrs.IsControl() && !c.cfg.Filter(r) // a transaction marker is no message
		}
		c.userMu.Unlock()
	}
	// One allocation for the fetch's work items, made before the
	// partition's lock. An item keeps its slab alive while it is queued or
	// running; those records are within the partition's bound anyway.
	slab := make([]work, len(recs))
	n := 0
	filtered, prior, cut := p.admit(recs, hwm, drop, func(i int, seq uint64) {
		w := &slab[n]
		w.rec, w.p, w.seq = recs[i], p, seq
		w.placed, w.moves = p.growAdmitLocked(recs[i], seq)
		n++
	})
	out := slab[:n]
	if filtered > 0 {
		c.stats.filtered.Add(int64(filtered))
	}
	if prior > 0 {
		c.stats.skippedDone.Add(int64(prior))
	}
	if cut > 0 {
		c.stats.truncations.Add(1)
		c.log().Error().Str("topic", p.key.topic).Int32("partition", p.key.partition).Int64("offset", recs[0].Offset).
			Msg("log truncated: offsets were reused (unclean leader election); the reused offsets are handled as new records")
	}
	res := c.cfg.Throttle.Resource
	if c.cfg.SessionKey != nil || res != nil {
		c.userMu.Lock()
		defer c.userMu.Unlock()
	}
	order := c.cfg.Order[p.key.topic]
	for i := range out {
		w := &out[i]
		w.session = c.sessionOf(w.rec)
		if res != nil {
			w.resource = res(w.rec)
		}
		w.lane = laneOf(order, w, p)
		w.moves = w.moves && order == OrderSession // only a session's order is kept across a growth
	}
	return out
}

func (c *Consumer) sessionOf(r *kgo.Record) string {
	if c.cfg.SessionKey != nil {
		return c.cfg.SessionKey(r)
	}
	if len(r.Key) == 0 {
		return ""
	}
	// The key's bytes belong to the record, which lives as long as the
	// string is used per record; a lane that outlives its record stores a
	// copy (shard.enqueue). This saves an allocation per record.
	return unsafe.String(unsafe.SliceData(r.Key), len(r.Key))
}

// shardOf is the shard of a lane key: its 64-bit hash scaled onto the
// shards (a multiply and a shift, where Jump would loop).
func (c *Consumer) shardOf(lane string) *shard {
	hi, _ := bits.Mul64(hashring.Sum64(lane), uint64(len(c.shards)))
	return c.shards[hi]
}

// laneOf is the lane w runs in on p under order o: its session's (with no
// session, its partition's), its partition's, or one of its own.
func laneOf(o Order, w *work, p *partition) string {
	switch {
	case o == OrderNone:
		return p.keyless + "@" + strconv.FormatInt(w.rec.Offset, 10)
	case o == OrderPartition || w.session == "":
		return p.keyless // computed once: no allocation per record
	}
	return w.session
}
