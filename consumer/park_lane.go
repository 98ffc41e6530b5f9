package consumer

import (
	"time"
)

// openPark starts the park client when parking is on.
func (c *Consumer) openPark() error {
	if !c.cfg.Park.Enabled {
		return nil
	}
	var err error
	c.park, err = openPark(&c.cfg)
	return err
}

func (c *Consumer) closePark() {
	if c.park != nil {
		c.park.client.Close()
	}
}

// enablePark gives newly assigned partitions their parked sets, with the
// group generation (member epoch under KIP-848) they were assigned in:
// their fences carry it, so that one written late by an owner that lost
// the partition since is told apart (the identity rules, internal/parkset).
func (c *Consumer) enablePark(parts []*partition, gen int32, proto string) {
	if c.park == nil {
		return
	}
	for _, p := range parts {
		p.enablePark(c.cfg.Park.rules(), c.cfg.Group, gen, proto)
	}
}

// skipSeen finishes a started source record done before (a redelivery
// of a record whose park copy is in the park topic) and reports true; false
// for any other.
func (c *Consumer) skipSeen(w *work) bool {
	seen, _ := w.p.parkCheck(w.lane, w.rec.Offset)
	if seen {
		c.doneBefore(w)
	}
	return seen
}

// doneBefore finishes w, done before.
func (c *Consumer) doneBefore(w *work) {
	c.stats.skippedDone.Add(1)
	w.p.finish(w.seq, true)
}

// forwardParked handles a started source record of a partition with
// parking: one done before (done at once) or of a parked session (its
// copy forwarded behind the session's others, not handled). It reports
// false for a record to handle.
func (c *Consumer) forwardParked(w *work) bool {
	seen, parked := w.p.parkCheck(w.lane, w.rec.Offset)
	switch {
	case seen:
		c.doneBefore(w)
	case parked:
		now := time.Now()
		w.p.finish(w.seq, c.parkOut(w, nil, 0, now, now, "forwarded: its session is parked"))
	default:
		return false
	}
	return true
}

// parkOut writes the park copy of w's record and, once acknowledged, adds
// it to its partition's parked set. It reports false when the partition
// was fenced first (the next owner reads the record again). A failing
// write is retried for as long as the partition is ours: the record holds
// the watermark meanwhile, as a failing dead-letter write does.
//
// It holds the record's claim, like a dead-letter write: a record the
// stall skipper (SkipStalled) dead-lettered first is not parked too.
func (c *Consumer) parkOut(w *work, cause error, attempts int, first, now time.Time, reason string) bool {
	w.claim.Lock()
	defer w.claim.Unlock()
	if w.p.isDone(w.seq) {
		return false // skipped as stalled meanwhile
	}
	if cause != nil {
		reason = cause.Error()
	}
	rec, stub, size, limit := c.park.fit(c.park.w.Copy(w.rec, w.lane, w.p.parkEpoch(), attempts, first, now.Add(c.cfg.Park.Delay), reason))
	if stub {
		c.logStub(rec, size, limit, nil)
	}
	off, ok := c.parkWrite(w.p, rec)
	if !ok {
		return false
	}
	w.p.parked(w.seq, w.lane, w.placed.Count, off, w.rec.Offset, time.Now())
	if cause != nil {
		l := c.recordLog(noSpan, w)
		l.Warn().Int("attempts", attempts).Str("park_topic", rec.Topic).Int64("park_offset", off).AnErr("cause", cause).
			Msg("park: record parked; its session's later records follow it to the park topic until it is retried successfully")
	}
	return true
}
