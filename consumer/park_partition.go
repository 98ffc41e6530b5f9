package consumer

import (
	"fmt"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkahead"
	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// parkNeeded returns those of rs, records of p's park partition read
// along with a head, that are parked records still waiting for a retry
// (the read-ahead keeps no copy already done, nor a marker).
func (p *partition) parkNeeded(rs []*kgo.Record) []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*kgo.Record
	for _, r := range rs {
		if p.pk.set.Needs(parkwire.Value(r, parkwire.HeaderSession), r.Offset) {
			out = append(out, r)
		}
	}
	return out
}

// parkAhead is p's read-ahead of parked copies.
func (p *partition) parkAhead() *parkahead.ReadAhead {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &p.pk.ahead
}

// parkMetaRoom is what the park section may take of the commit metadata.
const parkMetaRoom = len(parkMetaSep) + 3*20 + len("consumer") + 5 + 2*32

// parkRoomLocked is the room p's commits keep for a park section. p.mu
// held.
func (p *partition) parkRoomLocked() int {
	if p.pk == nil && p.parkKept == "" {
		return 0
	}
	return parkMetaRoom
}

// enablePark gives p its parked set, for group, whose generation was gen
// (of group protocol proto) when p was assigned; called at assignment.
// Its committed park section is unread until parkCommitted.
func (p *partition) enablePark(r parkset.Rules, group string, gen int32, proto string) {
	p.mu.Lock()
	p.pk = &partPark{set: parkset.New(r, group), gen: gen, proto: proto, from: noParkCommit, unread: true}
	p.mu.Unlock()
}

// parkCommitted records the park section of the group's commit metadata
// (meta "": no commit). With parking off, a section found is kept in
// p's commits, and reported true: what was parked stays where it is.
func (p *partition) parkCommitted(meta string) (kept bool) {
	_, pc, ok := splitParkMeta(meta)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pk == nil {
		p.parkOffUnread = false
		if ok {
			p.parkKept = pc.String()
		}
		return ok
	}
	p.pk.from, p.pk.unread = pc, false
	return false
}

// parkMetaLocked appends the park section to meta, for a commit at
// watermark wm. A partition whose parked set is not rebuilt (not yet, or
// its rebuild failed) commits the section it found, none when it found
// none; one without parking, a section kept. p.mu held.
func (p *partition) parkMetaLocked(meta string, wm int64) string {
	switch {
	case p.pk == nil:
		return meta + p.parkKept
	case !p.pk.rebuilt:
		if p.pk.from.pos < 0 {
			return meta
		}
		return meta + p.pk.from.String()
	}
	set := p.pk.set
	set.ForgetBelow(wm)
	pos := set.Position()
	return meta + parkCommit{pos: pos, fence: set.CommitFence(pos), ids: p.pk.ids}.String()
}

// parkUnreadLocked reports whether p's committed park section is unknown
// (the assignment could not read the group's commits): a commit now would
// drop it. p.mu held.
func (p *partition) parkUnreadLocked() bool {
	if p.pk != nil {
		return p.pk.unread
	}
	return p.parkOffUnread
}

// parkTruncatedLocked tells the parked set that the source log was
// truncated at offset at: its floors described the old log. p.mu held.
func (p *partition) parkTruncatedLocked(at int64) {
	if p.pk != nil {
		p.pk.set.Truncated(at)
	}
}

// parkCheck tells what a source record of lane at offset off is: done
// before (seen: done at once), or of a parked session (forwarded).
func (p *partition) parkCheck(lane string, off int64) (seen, parked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.set.Seen(lane, off), p.pk.set.IsParked(lane)
}

// parked records a park copy acknowledged at parkOff: its session parked
// (or its list longer), and its source record seq done in the same step,
// under the record's claim (the stall skipper, finding it done, writes no
// dead-letter copy of it). The caller then finishes the source record.
func (p *partition) parked(seq uint64, lane string, level int, parkOff, srcOff int64, now time.Time) {
	lane = strings.Clone(lane) // it may point into a fetch buffer
	p.mu.Lock()
	p.pk.levels.note(lane, srcOff, level, p.pk.set.IsParked(lane))
	p.pk.set.Add(lane, parkOff, srcOff, now)
	p.tr.Done(seq)
	p.forgetDLQLocked()
	p.tr.Touch() // the park position may have moved: due for a commit
	p.unlock(p.settleLocked())
}

func (p *partition) parkDue(now time.Time, skip func(string) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pk == nil || p.fenced {
		return nil
	}
	return p.pk.set.DueExcept(now, skip)
}

// parkHurry makes session's parked head due at now (it was resumed).
func (p *partition) parkHurry(session string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pk != nil && !p.fenced {
		p.pk.set.Hurry(session, now)
	}
}

func (p *partition) parkHead(lane string) (parkset.Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.set.Head(lane)
}

func (p *partition) parkAbandon(lane string) {
	p.mu.Lock()
	p.pk.set.RetryAbandoned(lane)
	p.mu.Unlock()
}

// parkRetryLater makes lane's parked head due again after the park delay:
// its retry could not be made (its copy not read back).
func (p *partition) parkRetryLater(lane string, now time.Time) {
	p.mu.Lock()
	p.pk.set.RetryLater(lane, now)
	p.mu.Unlock()
}

func (p *partition) parkFailed(lane string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.set.Failed(lane, now)
}

// parkMarked applies a done or hold marker acknowledged at parkOff. After
// a done marker it reports whether the session's next head is due and, if
// so, marks it retrying in the same step (the park loop cannot take it in
// between): the caller queues its retry.
func (p *partition) parkMarked(kind parkset.Kind, lane string, through, parkOff int64, now time.Time) (next bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tr.Touch()
	if kind == parkset.KindHold {
		p.pk.set.Held(lane, through, parkOff)
		return false
	}
	p.pk.set.Done(lane, through, parkOff, now)
	if !p.pk.set.IsParked(lane) {
		delete(p.pk.levels, lane) // unparked
	}
	return !p.fenced && p.pk.set.DueNow(lane, now)
}

// parkEpoch is the epoch this owner writes its entries under.
func (p *partition) parkEpoch() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.set.Epoch()
}

// startExtra counts a parked record's retry, or a retried rebuild, as
// running work of the partition (a revoke's drain waits for it); false
// when fenced.
func (p *partition) startExtra() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return false
	}
	p.running++
	return true
}

func (p *partition) finishExtra() {
	p.mu.Lock()
	p.running--
	if p.fenced && p.running == 0 {
		close(p.drained)
	}
	p.mu.Unlock()
}

// parkUnavailable holds p after a failed rebuild: without its parked set
// no record of it may start (one of a parked session would run out of
// order), so what is fetched waits in its stash (backpressure.go; fetching
// pauses at half the bound) and the park loop tries the rebuild again
// (parkRebuildDue), backing off from one second to thirty.
func (p *partition) parkUnavailable(err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pk.unavailable = err
	p.pk.retryAt = now.Add(min(time.Second<<min(p.pk.retries, 5), 30*time.Second))
	p.pk.retries++
}

// parkRebuildDue reports whether the park loop should try p's rebuild now.
func (p *partition) parkRebuildDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parkHeldLocked() && !p.fenced && !now.Before(p.pk.retryAt)
}

// parkAvailable ends the hold after a rebuild succeeded: the stash drains
// (the flow controller is told).
func (p *partition) parkAvailable() {
	p.mu.Lock()
	p.pk.unavailable, p.pk.retries = nil, 0
	p.unlock(len(p.stash) > 0 && !p.fenced)
}

// parkStatsLocked fills ps.Park. p.mu held.
func (p *partition) parkStatsLocked(ps *PartitionStats, now time.Time) {
	if p.pk == nil {
		return
	}
	c := p.pk.set.Counts(now)
	ps.Park = ParkStats{Sessions: c.Sessions, Held: c.Held, Records: c.Records, Oldest: c.Oldest}
	if p.pk.unavailable != nil {
		ps.Park.Error = p.pk.unavailable.Error()
	}
	p.parkWrites.fill(&ps.Park, now)
}

// parkReasons are Health's reasons about parking: partitions whose park
// writes fail, whose parked set could not be rebuilt, and whose oldest
// parked record is older than age.
func parkReasons(parts []PartitionStats, age time.Duration) []string {
	var out []string
	for _, ps := range parts {
		if r := parkWriteReason(ps); r != "" {
			out = append(out, r)
		}
		switch {
		case ps.Park.Error != "":
			out = append(out, fmt.Sprintf("%s/%d parked sessions unavailable, partition held: %s", ps.Topic, ps.Partition, ps.Park.Error))
		case ps.Park.Records > 0 && ps.Park.Oldest > age:
			out = append(out, fmt.Sprintf("%s/%d oldest parked record is %v old (over %v): %d records of %d sessions parked, %d held",
				ps.Topic, ps.Partition, ps.Park.Oldest.Round(time.Second), age, ps.Park.Records, ps.Park.Sessions, ps.Park.Held))
		}
	}
	return out
}
