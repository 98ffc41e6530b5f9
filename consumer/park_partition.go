package consumer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// parkSeq is the sequence number of a parked record's retry: it is no
// record of the source partition's tracker.
const parkSeq = ^uint64(0)

// partPark is a partition's parking state: its parked set, who this
// owner is, and the park section its group's commit held when it was
// assigned.
type partPark struct {
	set   *parkset.Set
	gen   int32  // this owner's generation when assigned: its fence carries it
	proto string // the group protocol gen is of (membership.protocol)
	// from is the committed park section; from.pos -1: none (nothing in
	// the park partition before this owner's fence is the group's).
	from parkCommit
	// unread: the group's committed offsets could not be read at
	// assignment; the rebuild reads them first, and nothing of the
	// partition is committed meanwhile (a commit would drop the park
	// position).
	unread bool
	ids    topicIDs // of the source and park topics, as the rebuild found them
	// rebuilt: the parked set was rebuilt; until then the partition's
	// commits carry the section it found (from), not the set's.
	rebuilt     bool
	tail        int64     // where the next look for release markers starts (park_release.go)
	unavailable error     // the rebuild failed: nothing of the partition starts
	retryAt     time.Time // when the park loop tries the rebuild again
	retries     int       // rebuilds failed in a row
	ahead       readAhead // parked copies read along with a head
}

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
func (p *partition) parkAhead() *readAhead {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &p.pk.ahead
}

// Commit metadata: lanes' completed offsets (internal/offsets), then the park
// section: ";park2:<position>,<fence>,<generation>,<protocol>,<topic
// ID>,<park topic ID>", the park position and the fence in force there
// (park offset, generation and the group protocol it is of), and the IDs
// of the source and park topics ("" unknown).
const parkMetaSep = ";park2:"

// parkCommit is the park section of a commit.
type parkCommit struct {
	pos   int64
	fence parkset.Fence
	ids   topicIDs
}

var noParkCommit = parkCommit{pos: -1, fence: parkset.NoFence}

// committed is pc as the identity rules take it (parkset.Start).
func (pc parkCommit) committed() parkset.Committed {
	return parkset.Committed{Pos: pc.pos, Fence: pc.fence, TopicID: pc.ids.source, ParkTopicID: pc.ids.park}
}

func (pc parkCommit) String() string {
	return parkMetaSep + strconv.FormatInt(pc.pos, 10) + "," + strconv.FormatInt(pc.fence.Off, 10) + "," +
		strconv.FormatInt(int64(pc.fence.Gen), 10) + "," + pc.fence.Proto + "," + pc.ids.source + "," + pc.ids.park
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

// splitParkMeta separates the park section from commit metadata; ok is
// false when there is none (or it is not one this version reads).
func splitParkMeta(meta string) (rest string, pc parkCommit, ok bool) {
	rest, park, found := strings.Cut(meta, parkMetaSep)
	if !found {
		return meta, noParkCommit, false
	}
	f := strings.Split(park, ",")
	if len(f) != 6 || (f[3] != "" && f[3] != "classic" && f[3] != "consumer") {
		return rest, noParkCommit, false
	}
	pos, err1 := strconv.ParseInt(f[0], 10, 64)
	off, err2 := strconv.ParseInt(f[1], 10, 64)
	gen, err3 := strconv.ParseInt(f[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || off < 0 || off >= pos {
		return rest, noParkCommit, false
	}
	return rest, parkCommit{pos: pos, fence: parkset.Fence{Off: off, Gen: int32(gen), Proto: f[3]}, ids: topicIDs{f[4], f[5]}}, true
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
func (p *partition) parked(seq uint64, lane string, parkOff, srcOff int64, now time.Time) {
	lane = strings.Clone(lane) // it may point into a fetch buffer
	p.mu.Lock()
	p.pk.set.Add(lane, parkOff, srcOff, now)
	p.tr.Done(seq)
	p.forgetDLQLocked()
	p.tr.Touch() // the park position may have moved: due for a commit
	p.unlock(p.settleLocked())
}

func (p *partition) parkDue(now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pk == nil || p.fenced {
		return nil
	}
	return p.pk.set.Due(now)
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
	return !p.fenced && p.pk.set.DueNow(lane, now)
}

// parkEpoch is the epoch this owner writes its entries under.
func (p *partition) parkEpoch() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.set.Epoch()
}

// startExtra counts a parked record's retry as running work of the
// partition (a revoke's drain waits for it); false when fenced.
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

// parkHeldLocked reports whether p's parked set is unavailable: nothing of
// p reaches a lane. p.mu held.
func (p *partition) parkHeldLocked() bool { return p.pk != nil && p.pk.unavailable != nil }

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

// ParkStats describes the parked sessions of one partition.
type ParkStats struct {
	// Sessions parked, and of them Held (retry budget spent, ParkHold).
	Sessions int `json:"sessions"`
	Held     int `json:"held"`
	// Records parked, not yet done.
	Records int `json:"records"`
	// Oldest is the age of the oldest parked record.
	Oldest time.Duration `json:"oldest"`
	// Error is why the parked set could not be rebuilt (the partition then
	// starts nothing); "" normally.
	Error string `json:"error"`
	// WriteError is the error of a write to the park partition (a parked
	// copy or a marker) failing for WriteFailingFor, the longest failing
	// when several are: what waits for it holds the partition (a record
	// to park holds the watermark), and it is retried until it succeeds.
	// "" when no park write fails; it clears when that write succeeds or
	// the partition leaves this member.
	WriteError      string        `json:"write_error"`
	WriteFailingFor time.Duration `json:"write_failing_for"`
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
