package consumer

import (
	"strconv"
	"sync"
	"time"
	"unsafe"

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
	queued    int  // records handed to lanes, not started
	running   int  // records whose handler (or DLQ write) is under way
	paused    bool // wanted fetch state; applied by the flow controller
	fenced    bool // revoked, lost or shutting down: start nothing more
	fence     chan struct{}
	drained   chan struct{} // closed once fenced and running == 0
	committed int64         // last offset committed by this assignment; -1 none
	hwm       int64         // high watermark from the latest fetch; -1 unknown

	committedMeta    string    // metadata of the last commit
	committedVersion uint64    // tracker version the last commit (or check) covered
	skip             skipper   // offsets completed before this assignment
	lastWM           int64     // watermark at the last stall check
	movedAt          time.Time // when the stall check last saw it move
	stalled          bool
}

func newPartition(k partKey, epoch uint64) *partition {
	return &partition{
		key: k, epoch: epoch, tr: newTracker(),
		fence: make(chan struct{}), drained: make(chan struct{}),
		committed: -1, hwm: -1, lastWM: -1, movedAt: time.Now(),
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
	msg     Message    // handed to the handler; part of work to save an allocation
	first   attemptCtx // the first attempt's context, likewise
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
		works, pause := c.admit(p, ftp)
		for _, w := range works {
			c.shards[hashring.Jump(hashring.Sum64(w.lane), len(c.shards))].enqueue(w)
		}
		if pause {
			c.flow.mark(p)
		}
	})
	c.flow.apply()
}

// admit registers a partition's fetched records with its tracker, under one
// lock, and returns the work to hand to lanes, and whether the partition has
// just reached MaxBufferedRecords (it then wants its fetch paused). Filtered
// records are done at once; records at or below an offset already seen are
// dropped.
func (c *Consumer) admit(p *partition, ftp kgo.FetchTopicPartition) (out []*work, pause bool) {
	var drop []bool // Filter's verdicts, computed outside the lock; nil: keep all
	if c.cfg.Filter != nil {
		drop = make([]bool, len(ftp.Records))
		for i, r := range ftp.Records {
			drop[i] = !c.cfg.Filter(r)
		}
	}
	out = make([]*work, 0, len(ftp.Records))
	filtered, skipped := 0, 0
	p.mu.Lock()
	p.hwm = ftp.HighWatermark
	for i, r := range ftp.Records {
		seq, fresh := p.tr.fetched(r.Offset)
		switch {
		case !fresh:
		case p.skip.done(r.Offset):
			p.tr.done(seq)
			skipped++
		case drop != nil && drop[i]:
			p.tr.done(seq)
			filtered++
		default:
			p.queued++
			out = append(out, &work{rec: r, p: p, seq: seq})
		}
	}
	if pause = !p.fenced && !p.paused && p.queued+p.running >= c.cfg.MaxBufferedRecords; pause {
		p.paused = true
	}
	p.mu.Unlock()
	if filtered > 0 {
		c.stats.filtered.Add(int64(filtered))
	}
	if skipped > 0 {
		c.stats.skippedDone.Add(int64(skipped))
	}
	for _, w := range out {
		w.session = c.sessionOf(w.rec)
		w.lane = w.session
		if w.lane == "" {
			w.lane = "\x00" + w.rec.Topic + "/" + strconv.FormatInt(int64(w.rec.Partition), 10)
		}
	}
	return out, pause
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

// owned returns the current state of a partition we own, or nil.
func (c *Consumer) owned(k partKey) *partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[k]
}
