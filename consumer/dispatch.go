package consumer

import (
	"strconv"
	"sync"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
)

type partKey struct {
	topic     string
	partition int32
}

// partition is the state of one partition for one assignment of it. A new
// assignment gets a new partition value, so work that finishes after its
// partition was revoked only ever touches the old value: the fence by
// assignment epoch.
type partition struct {
	key   partKey
	epoch uint64

	mu        sync.Mutex
	tr        tracker
	queued    int   // records handed to lanes, not started
	running   int   // records whose handler (or DLQ write) is under way
	paused    bool  // wanted fetch state; applied by the flow controller
	fenced    bool  // revoked, lost or shutting down: start nothing more
	fence     chan struct{}
	drained   chan struct{} // closed once fenced and running == 0
	committed int64         // last offset committed by this assignment; -1 none
	hwm       int64         // high watermark from the latest fetch; -1 unknown
}

func newPartition(k partKey, epoch uint64) *partition {
	return &partition{
		key: k, epoch: epoch, tr: newTracker(),
		fence: make(chan struct{}), drained: make(chan struct{}),
		committed: -1, hwm: -1,
	}
}

// fenceLocked stops the partition from starting any more work. p.mu held.
func (p *partition) fenceLocked() {
	if p.fenced {
		return
	}
	p.fenced = true
	close(p.fence)
	if p.running == 0 {
		close(p.drained)
	}
}

// work is one record on its way through a lane.
type work struct {
	rec     *kgo.Record
	p       *partition
	seq     uint64
	session string
	lane    string
}

// dispatch routes one poll's records, in partition order, to their lanes.
// It runs on the poll loop, between PollRecords and AllowRebalance, so no
// rebalance can interleave with it.
func (c *Consumer) dispatch(fs kgo.Fetches) {
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		p := c.owned(partKey{ftp.Topic, ftp.Partition})
		if p == nil {
			return // not ours (any more): the owner fetches it again
		}
		p.mu.Lock()
		p.hwm = ftp.HighWatermark
		p.mu.Unlock()
		for _, r := range ftp.Records {
			c.route(p, r)
		}
		c.flow.markIfOver(p, c.cfg.MaxBufferedRecords)
	})
	c.flow.apply()
}

func (c *Consumer) route(p *partition, r *kgo.Record) {
	keep := c.cfg.Filter == nil || c.cfg.Filter(r)
	p.mu.Lock()
	seq, fresh := p.tr.fetched(r.Offset)
	if fresh && !keep {
		p.tr.done(seq)
	}
	if fresh && keep {
		p.queued++
	}
	p.mu.Unlock()
	if !fresh {
		return
	}
	if !keep {
		c.stats.filtered.Add(1)
		return
	}
	session := c.sessionOf(r)
	lane := session
	if lane == "" {
		lane = "\x00" + r.Topic + "/" + strconv.FormatInt(int64(r.Partition), 10)
	}
	w := &work{rec: r, p: p, seq: seq, session: session, lane: lane}
	c.shards[hashring.Jump(hashring.Sum64(lane), len(c.shards))].enqueue(w)
}

func (c *Consumer) sessionOf(r *kgo.Record) string {
	if c.cfg.SessionKey != nil {
		return c.cfg.SessionKey(r)
	}
	if r.Key == nil {
		return ""
	}
	return string(r.Key)
}

// owned returns the current state of a partition we own, or nil.
func (c *Consumer) owned(k partKey) *partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[k]
}

// eventID reads the record's event ID header.
func eventID(r *kgo.Record) string { return eventid.FromRecord(r) }
