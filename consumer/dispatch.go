package consumer

import (
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
		for _, w := range c.admit(p, ftp) {
			c.shards[hashring.Jump(hashring.Sum64(w.lane), len(c.shards))].enqueue(w)
		}
	})
	c.flow.apply()
}

// admit registers a partition's fetched records with it and returns the
// work to hand to lanes, each with its session and lane key.
func (c *Consumer) admit(p *partition, ftp kgo.FetchTopicPartition) []*work {
	var drop []bool // Filter's verdicts, computed outside the lock; nil: keep all
	if c.cfg.Filter != nil {
		drop = make([]bool, len(ftp.Records))
		for i, r := range ftp.Records {
			drop[i] = !c.cfg.Filter(r)
		}
	}
	out := make([]*work, 0, len(ftp.Records))
	filtered, prior, cut := p.admit(ftp.Records, ftp.HighWatermark, drop, func(i int, seq uint64) {
		out = append(out, &work{rec: ftp.Records[i], p: p, seq: seq})
	})
	if filtered > 0 {
		c.stats.filtered.Add(int64(filtered))
	}
	if prior > 0 {
		c.stats.skippedDone.Add(int64(prior))
	}
	if cut > 0 {
		c.stats.truncations.Add(1)
		c.log().Error().Str("topic", p.key.topic).Int32("partition", p.key.partition).Int64("offset", ftp.Records[0].Offset).
			Msg("log truncated: offsets were reused (unclean leader election); the reused offsets are handled as new records")
	}
	for _, w := range out {
		w.session = c.sessionOf(w.rec)
		w.lane = w.session
		if w.lane == "" {
			w.lane = "\x00" + w.rec.Topic + "/" + strconv.FormatInt(int64(w.rec.Partition), 10)
		}
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
