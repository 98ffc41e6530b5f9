package parkset

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// The parked set's model-based test. A driver plays the lanes of one source
// partition the way the consumer does
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md): it fetches
// records into per-session lane queues, handles them with random failures
// (some sessions stuck for a while), parks records past the threshold or at
// once (Park(err)), forwards the records of parked sessions, retries parked
// heads when due, dead-letters them when their budget is spent (hold, then
// an operator's release, or release), writes done and hold markers, commits
// the source watermark, its completed offsets and the park position as one
// snapshot, and crashes at random: between a park write and its
// acknowledgement, between a retry and its marker, at any step; a revoke is
// a commit and a hand-over to a new owner that rebuilds the parked set from
// the park log. Every Set decision is the real one.
//
// The reference is what a plain lanes partition promises: every session's
// records are first handled (or dead-lettered) in source order; none is
// lost; a record is handled again only if a crash came after its handling
// and before that handling was durable (in a commit, or in a marker).
//
// The world outside the group is in the park log too (writers' rules):
// another group parking the same sessions of the same topic writes its
// copies, markers and fences (with generations of its own) to the same
// park partition, and so does a writer that names no group; a member that
// lost the partition lands a fence late (its retried rebuild, with its old
// generation), and copies and markers under it; an operator resets the
// group's offsets (empty metadata) to the start or to an earlier offset
// while the group is stopped; the source topic is deleted and made again
// (new records from offset 0, the same session names, the group's
// commits gone), and with it, as often, the group (empty, its offsets
// gone: Kafka removes it), whose generations then start again while a
// former owner's fence of the topic's earlier incarnation, of a higher
// generation, may still land late; the park topic is deleted and made
// again (its partition from offset 0, other groups' entries in it, the
// group's commit naming the former park topic's ID and a position of
// it); the group is deleted and made again (its generations start again,
// its commits gone: it reads the topic from the start); the group
// protocol is switched, classic to consumer (KIP-848) or back (the
// member epochs start again near 1 under the other protocol, the commit
// kept: a reset fence). The reference says what is correct after each:
// after a reset to offset x every record from x on is handled again, in
// each session's order, and none before x is handled; after the source
// topic or the group is made again every record is handled in order, as
// in a new topic or group; after the park topic is made again the records
// parked then (the group committed past them unhandled) are lost, as
// docs/parking.md says (Identity, Limits), and reported (Start says
// ParkTopicLost), and nothing else is: every other record is handled in
// order, the lost ones counted in their sessions' order where they were;
// after a protocol switch nothing changes. Nothing another group or a
// former owner wrote changes what this group handles.
//
// A write in flight when the group stops lands before a world that needs
// the group stopped for a while (the park topic, the group or its
// protocol made again): a fence of the group's former life landing after
// its new life's fences names nothing a rebuild could tell apart from a
// newer owner's (no entry names a group's incarnation). A former owner's
// fence of the source topic's earlier incarnation lands at any time: it
// names the topic's former ID.
//
// The rebuild starts where Start says, as the consumer's does; the
// reference says independently whether anything in the park partition is
// still the group's (pmCommit.live).

type pmEntry = Entry

// pmCommit is the group's commit: the source watermark and the park
// section as the consumer commits it (the park position, the fence in
// force there and the topic IDs it was made under). live is the
// reference's: the park section names a position in the park partition
// there is now, of the source topic there is now (false when the park
// topic was made again since).
type pmCommit struct {
	wm   int64
	pc   Committed
	live bool
}

type pmItem struct {
	src   int64
	retry bool
}

// pmMember is one owner's in-memory state: lost in a crash.
type pmMember struct {
	ps    *Set
	done  map[int64]bool // source records done in this assignment
	pos   int64          // next source offset to fetch
	lanes map[string][]pmItem
	fails map[int64]int // failed in-lane attempts per source record
	// parkFails counts failed retries per parked record: never more than
	// the budget, the last of them dead-letters it. A new owner starts
	// from the counts the attempt markers carried.
	parkFails map[int64]int
	gen       int32
}

type parkModel struct {
	t    *testing.T
	rng  *rand.Rand
	hold bool

	gen     int32  // the group's generation: one more per new owner
	proto   string // the group protocol gen is of: classic or consumer
	topicID string
	// parkID is the park topic's ID; parkIDKnown whether the member and
	// its commits know it (a broker or version that gives none: "").
	parkID      string
	parkIDKnown bool
	// noSourceIDs: a broker that gives no topic IDs (Kafka before 2.8,
	// some Kafka-compatible brokers): fences and commits name no source
	// topic, and the world makes no source topic again (without IDs an
	// earlier incarnation's late fence cannot be told apart: a limit in
	// docs/parking.md).
	noSourceIDs bool
	made        int // topics made again: their IDs
	// lost are the records lost with a park topic made again; wantLost:
	// some were, and the next rebuild is to report it.
	lost     int
	wantLost bool
	// seen counts what happened, by world, over all seeds (logged).
	seen map[string]int
	from int64 // records from here on must be handled (an operator's reset: later)
	// late is a fence of an owner that lost the partition (its rebuild,
	// retried, racing the revoke) still in flight; lateAt the park offset
	// where the last one landed (-1 none): a former owner's entries carry it.
	late   *pmEntry
	lateAt int64
	other  []int64 // park offsets of the other group's fences
	// unsure are this owner's markers written before any commit with a
	// park position: a rebuild would not read them (it starts at its own
	// fence), so they make nothing durable until such a commit.
	unsure []pmEntry

	src     []string // session of each source offset
	idx     []int    // position of each source offset in its session
	park    []pmEntry
	dlq     []int64
	commit  pmCommit
	cdone   map[int64]bool // completed offsets above the committed watermark
	events  map[int64]int  // handled or dead-lettered, per source offset
	handled map[string]int // records of each session with a first event, in order
	durable map[int64]bool
	repeat  map[int64]bool // may be handled again (a crash before it was durable)
	parkAt  map[int64]int64
	// parkFails counts the failed retries per parked record that attempt
	// markers were written for (not the one that spent the budget).
	parkFails map[int64]int
	stuck     map[string]bool
	orphan    *pmEntry // a crashed member's copy still in flight: lands before the next write
	now       time.Time
	m         *pmMember
	log       []string
}

const pmAfterAttempts = 3

func newParkModel(t *testing.T, seed uint64, seen map[string]int) *parkModel {
	rng := rand.New(rand.NewPCG(seed, 19))
	pm := &parkModel{t: t, rng: rng, hold: seed%2 == 0, cdone: map[int64]bool{}, stuck: map[string]bool{},
		seen: seen, now: time.Unix(1e9, 0), topicID: "t0", lateAt: -1, proto: "classic", parkID: "p0", parkIDKnown: true}
	if seed%3 == 0 {
		pm.proto = "consumer"
	}
	if seed%8 == 5 {
		pm.topicID, pm.noSourceIDs = "", true
		pm.saw("world: no source topic IDs")
	}
	pm.commit.pc = NoCommit
	pm.source()
	pm.rebase(0)
	pm.restart()
	return pm
}

// source makes the source partition's records: 20 to 80 of up to 7
// sessions.
func (pm *parkModel) source() {
	sessions := 2 + pm.rng.IntN(6)
	count := map[string]int{}
	pm.src, pm.idx = nil, nil
	for range 20 + pm.rng.IntN(60) {
		s := fmt.Sprintf("s%d", pm.rng.IntN(sessions))
		pm.src = append(pm.src, s)
		pm.idx = append(pm.idx, count[s])
		count[s]++
	}
}

// rebase starts the reference again from source offset from: every record
// from there on is to be handled (again), in order; none before it.
func (pm *parkModel) rebase(from int64) {
	pm.from = from
	pm.events, pm.durable, pm.repeat = map[int64]int{}, map[int64]bool{}, map[int64]bool{}
	pm.parkAt, pm.parkFails, pm.handled = map[int64]int64{}, map[int64]int{}, map[string]int{}
	for o := int64(0); o < from; o++ {
		pm.handled[pm.src[o]]++
	}
}

func (pm *parkModel) rules() Rules {
	return Rules{Delay: time.Second, MaxDelay: 8 * time.Second, MaxAttempts: 2 + pm.rng.IntN(3), Hold: pm.hold}
}

const pmGroup = "g"

// restart makes a new owner from the last commit: the parked set rebuilt
// by reading the park log from where Start says (the committed park
// position, or its own fence when nothing before it is the group's) to
// its own fence; when a fence of the other group protocol is in force
// above its own (OtherProtocol), it writes a reset fence and reads on to
// it, as the consumer does. The owner before it may still land a fence,
// late.
func (pm *parkModel) restart() {
	if pm.m != nil && pm.rng.IntN(4) == 0 {
		pm.late = &pmEntry{Kind: KindFence, Group: pmGroup, Gen: pm.m.gen, Proto: pm.proto, TopicID: pm.topicID, Epoch: -1}
	}
	pm.gen++
	pm.unsure = nil
	m := &pmMember{ps: New(pm.rules(), pmGroup), done: map[int64]bool{}, pos: pm.commit.wm,
		lanes: map[string][]pmItem{}, fails: map[int64]int{}, parkFails: maps.Clone(pm.parkFails), gen: pm.gen}
	m.ps.SetTopicID(pm.topicID)
	pm.m = m
	own := pmEntry{Kind: KindFence, Group: pmGroup, Gen: m.gen, Proto: pm.proto, TopicID: pm.topicID}
	fence, _ := pm.write(own) // never crashes: see write
	start, inForce, why := Start(pm.commit.pc, pm.topicID, pm.parkIDNow(), fence)
	pm.step("rebuild from park[%d] (%s), in force %+v", start, pmOrigin[why], inForce)
	pm.saw("rebuild: Start says " + pmOrigin[why])
	if pm.wantLost && why != ParkTopicLost && ((pm.parkIDKnown && pm.commit.pc.ParkTopicID != "") || pm.commit.pc.Pos > fence) {
		pm.fail("records parked in the park topic deleted and made again are lost, but the rebuild does not say so: it starts at park[%d] (%s)", start, pmOrigin[why])
	}
	pm.wantLost = false
	if !pm.commit.live { // nothing before the fence is the group's: no attempt marker either
		clear(pm.parkFails)
		clear(m.parkFails)
	}
	m.ps.Begin(start, inForce)
	pm.replay(start, fence)
	if m.ps.Replay(fence, pm.park[fence], pm.now) {
		return
	}
	if in := m.ps.InForce(); !in.OtherProtocol(pm.proto) {
		pm.fail("the new owner's own fence at park[%d] (generation %d, %s) not taken: in force %+v", fence, m.gen, pm.proto, in)
	}
	own.Reset = true
	reset, _ := pm.write(own)
	pm.step("reset fence at park[%d]: the group protocol switched", reset)
	pm.saw("rebuild: a reset fence written")
	pm.replay(fence+1, reset)
	if !m.ps.Replay(reset, pm.park[reset], pm.now) {
		pm.fail("the new owner's reset fence at park[%d] (generation %d, %s) not taken: in force %+v", reset, m.gen, pm.proto, m.ps.InForce())
	}
}

var pmOrigin = map[Origin]string{FromCommit: "FromCommit", NoPosition: "NoPosition", OtherTopic: "OtherTopic", ParkTopicLost: "ParkTopicLost"}

// replay replays park[from:to] into the new owner's parked set.
func (pm *parkModel) replay(from, to int64) {
	for i := from; i < to; i++ {
		e := pm.park[i]
		if e.Kind == KindFence && e.Group == pmGroup && e.TopicID != pm.topicID && e.Gen >= pm.m.ps.InForce().Gen {
			pm.saw("rebuild: a fence of the earlier source topic, generation not below the one in force")
		}
		if !pm.m.ps.Replay(i, e, pm.now) {
			pm.step("rebuild ignores park[%d] %c of %q epoch %d gen %d", i, e.Kind, e.Group, e.Epoch, e.Gen)
		}
	}
}

// parkIDNow is the park topic's ID as the member finds it.
func (pm *parkModel) parkIDNow() string {
	if pm.parkIDKnown {
		return pm.parkID
	}
	return ""
}

// foreign lands an entry another group (or a writer naming none) wrote to
// the same park partition: any kind, for this group's sessions and
// offsets, under the other group's fences and generations.
func (pm *parkModel) foreign() {
	group := "h"
	if pm.rng.IntN(4) == 0 {
		group = ""
	}
	s := pm.src[pm.rng.IntN(len(pm.src))]
	e := pmEntry{Kind: []Kind{KindRecord, KindDone, KindHold, KindAttempt, KindFence, KindRelease}[pm.rng.IntN(6)], Group: group,
		Session: s, Src: int64(pm.rng.IntN(len(pm.src))), Epoch: -1, Gen: pm.gen + int32(pm.rng.IntN(20)) - 5, Retries: 1 + pm.rng.IntN(3)}
	if n := len(pm.other); n > 0 {
		e.Epoch = pm.other[pm.rng.IntN(n)]
	}
	if pm.rng.IntN(3) == 0 { // or under this group's fence: the epochs of two groups meet
		e.Epoch = pm.m.ps.Epoch()
	}
	off := int64(len(pm.park))
	if e.Kind == KindFence {
		e.Session, e.TopicID, e.Proto = "", pm.topicID, []string{"classic", "consumer", ""}[pm.rng.IntN(3)]
		e.Reset = pm.rng.IntN(4) == 0
		pm.other = append(pm.other, off)
	}
	pm.park = append(pm.park, e)
	pm.step("park[%d] %c %s %d epoch %d gen %d (group %q)", off, e.Kind, e.Session, e.Src, e.Epoch, e.Gen, group)
}

// stopped runs what an operator does while the group is stopped (after a
// clean stop: a commit): reset its offsets (empty metadata) to the start
// or an earlier offset; delete the source topic and make it again (the
// group's commits go with it, and often the group: its generations start
// again); delete the park topic and make it again; delete the group and
// make it again; switch its group protocol. The group then starts again.
func (pm *parkModel) stopped() {
	op := pm.rng.IntN(5)
	if op == 1 && pm.noSourceIDs {
		op = 0 // no source topic made again without topic IDs
	}
	switch op {
	case 0:
		pm.commitNow()
		to := int64(pm.rng.IntN(int(pm.commit.wm) + 1))
		if pm.rng.IntN(2) == 0 {
			to = 0
		}
		pm.step("operator resets the offsets to %d (empty metadata)", to)
		pm.saw("world: offsets reset")
		pm.drop(to)
	case 1:
		pm.commitNow()
		if pm.late == nil && pm.rng.IntN(4) != 0 { // the stopped owner's retried rebuild, in flight
			pm.late = &pmEntry{Kind: KindFence, Group: pmGroup, Gen: pm.m.gen, Proto: pm.proto, TopicID: pm.topicID, Epoch: -1}
		}
		pm.made++
		pm.topicID = fmt.Sprintf("t%d", pm.made)
		pm.step("source topic deleted and made again (%s)", pm.topicID)
		pm.saw("world: source topic made again")
		if pm.rng.IntN(2) == 0 {
			pm.saw("world: source topic made again, the group with it")
			pm.againFrom("the group removed with its offsets")
		}
		old := pm.commit
		pm.source()
		pm.drop(0)
		if old.pc.Pos >= 0 && pm.rng.IntN(3) == 0 {
			// A former member's last commit, of the earlier topic, lands
			// after it was made again (by name): its offset and its park
			// section, which names the earlier topic's ID.
			wm := min(old.wm, int64(len(pm.src)))
			pm.step("a commit of the earlier topic lands: wm %d, its park section %+v", wm, old.pc)
			pm.saw("world: source topic made again, a commit of the earlier one landing after")
			pm.drop(wm)
			pm.commit.pc = old.pc
		}
		pm.m = nil // no former owner of the new topic
	case 2:
		pm.landInFlight()
		pm.commitNow()
		pm.parkMadeAgain()
		pm.m = nil
	case 3:
		pm.landInFlight()
		pm.commitNow()
		pm.step("group deleted and made again: its commits gone")
		pm.saw("world: group made again")
		pm.againFrom("a new group")
		pm.drop(0)
		pm.m = nil
	default:
		pm.landInFlight()
		pm.commitNow()
		from := pm.proto
		pm.proto = map[string]string{"classic": "consumer", "consumer": "classic"}[from]
		pm.step("group protocol switched from %s to %s (the commit kept)", from, pm.proto)
		pm.saw("world: group protocol switched")
		pm.againFrom("another protocol")
		pm.m = nil
	}
	pm.restart()
}

// drop drops the group's commits (empty metadata, or none) and starts the
// reference again from source offset to, where the group starts.
func (pm *parkModel) drop(to int64) {
	pm.commit = pmCommit{wm: to, pc: NoCommit}
	pm.cdone = map[int64]bool{}
	pm.rebase(to)
}

// againFrom starts the group's generations again, near 1.
func (pm *parkModel) againFrom(why string) {
	pm.gen = int32(pm.rng.IntN(3))
	pm.step("generations start again from %d (%s)", pm.gen+1, why)
}

// landInFlight lands the writes still in flight: a former owner's late
// fence and a crashed member's copy or marker.
func (pm *parkModel) landInFlight() {
	if f := pm.late; f != nil {
		pm.late, pm.lateAt = nil, int64(len(pm.park))
		pm.park = append(pm.park, *f)
		pm.step("park[%d] f gen %d (a former owner's fence, landing before the stop)", pm.lateAt, f.Gen)
	}
	if o := pm.orphan; o != nil {
		pm.orphan = nil
		pm.park = append(pm.park, *o)
		if o.Kind == KindRecord && o.Src < int64(len(pm.src)) {
			pm.parkAt[o.Src] = int64(len(pm.park) - 1)
		}
		pm.step("park[%d] %c %s %d epoch %d (a former owner's write, landing before the stop)", len(pm.park)-1, o.Kind, o.Session, o.Src, o.Epoch)
	}
}

// parkMadeAgain deletes the park topic and makes it again while the group
// is stopped: its partition starts from offset 0 and other groups write
// to it meanwhile; the group's commit keeps its park section (of the
// former park topic). The records parked then, which the group committed
// past unhandled, are lost with it (docs/parking.md, Identity): the
// reference counts them as lost where they were in their sessions, and
// says that the rebuild reports it when it can tell (the topic IDs known,
// or the position past the new partition's end).
func (pm *parkModel) parkMadeAgain() {
	pm.made++
	pm.parkID, pm.parkIDKnown = fmt.Sprintf("p%d", pm.made), pm.rng.IntN(4) != 0
	if !pm.parkIDKnown {
		pm.commit.pc.ParkTopicID = "" // nor did the member that committed know it
	}
	pm.step("park topic deleted and made again (%s, ID known %v)", pm.parkID, pm.parkIDKnown)
	pm.saw("world: park topic made again")
	n := 0
	for o := pm.from; o < int64(len(pm.src)); o++ {
		committed := o < pm.commit.wm || pm.cdone[o]
		_, parked := pm.parkAt[o]
		switch {
		case pm.events[o] == 0 && committed && !parked:
			pm.fail("record %d (%s #%d) committed past, never handled nor parked", o, pm.src[o], pm.idx[o])
		case pm.events[o] == 0 && committed:
			pm.event(o, "lost with the park topic")
			pm.durable[o] = true
			n++
		case pm.events[o] > 0 && !committed:
			// Handled, and durable only by a marker in the park topic, if
			// at all: delivered again, it may be handled again (its floor
			// is gone with the topic).
			pm.repeat[o] = true
		}
	}
	pm.lost += n
	pm.seen["park topic made again: records lost with it"] += n
	pm.park, pm.other, pm.lateAt = nil, nil, -1
	pm.parkAt, pm.parkFails = map[int64]int64{}, map[int64]int{}
	pm.commit.live = false
	for range pm.rng.IntN(int(pm.commit.pc.Pos)*3/2 + 5) { // the position past the new end, or not
		pm.foreign()
	}
	pm.wantLost = n > 0
}

// crash loses the member's memory; what was not durable may run again.
func (pm *parkModel) crash() {
	pm.step("crash")
	for i := len(pm.park) - 1; i >= 0 && pm.orphan == nil && pm.rng.IntN(3) == 0; i-- {
		if e := pm.park[i]; e.Kind == KindRecord {
			pm.orphan = &e
			break
		}
	}
	for o, n := range pm.events {
		if n > 0 && !pm.durable[int64(o)] {
			pm.repeat[int64(o)] = true
		}
	}
	pm.restart()
}

// saw counts an event of a world.
func (pm *parkModel) saw(what string) { pm.seen[what]++ }

func (pm *parkModel) step(format string, args ...any) {
	pm.log = append(pm.log, fmt.Sprintf(format, args...))
}

func (pm *parkModel) fail(format string, args ...any) {
	pm.t.Helper()
	tail := pm.log[max(0, len(pm.log)-40):]
	pm.t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

// event records that source record o was handled or dead-lettered and
// checks it against the reference.
func (pm *parkModel) event(o int64, what string) {
	pm.step("%s %d (%s #%d)", what, o, pm.src[o], pm.idx[o])
	s := pm.src[o]
	if pm.events[o] > 0 {
		if !pm.repeat[o] {
			pm.fail("record %d (%s #%d) %s again with no crash since its handling was durable", o, s, pm.idx[o], what)
		}
	} else {
		if pm.idx[o] != pm.handled[s] {
			pm.fail("session %s: record #%d %s before #%d", s, pm.idx[o], what, pm.handled[s])
		}
		pm.handled[s]++
	}
	pm.events[o]++
}

// write appends e to the park log and returns its offset; false when the
// member crashed before it saw the acknowledgement.
func (pm *parkModel) write(e pmEntry) (int64, bool) {
	e.Group, e.Epoch = pmGroup, pm.m.ps.Epoch()
	if e.Kind == KindFence {
		e.Epoch = -1
	}
	if o := pm.orphan; o != nil && e.Kind != KindFence && pm.rng.IntN(3) == 0 {
		pm.orphan = nil
		pm.park = append(pm.park, *o)
		if o.Kind == KindRecord && o.Src < int64(len(pm.src)) {
			pm.parkAt[o.Src] = int64(len(pm.park) - 1)
		}
		pm.step("park[%d] %c %s %d epoch %d (a former owner's write, landing late)", len(pm.park)-1, o.Kind, o.Session, o.Src, o.Epoch)
	}
	if f := pm.late; f != nil && pm.rng.IntN(3) == 0 {
		pm.late, pm.lateAt = nil, int64(len(pm.park))
		pm.park = append(pm.park, *f)
		pm.step("park[%d] f gen %d (a former owner's fence, landing late)", pm.lateAt, f.Gen)
		if pm.orphan == nil && pm.rng.IntN(2) == 0 { // and it goes on writing under it
			o := int64(pm.rng.IntN(len(pm.src)))
			k := []Kind{KindRecord, KindDone, KindHold}[pm.rng.IntN(3)]
			pm.orphan = &pmEntry{Kind: k, Group: pmGroup, Session: pm.src[o], Src: o, Epoch: pm.lateAt}
		}
	}
	off := int64(len(pm.park))
	pm.park = append(pm.park, e)
	pm.step("park[%d] %c %s %d epoch %d", off, e.Kind, e.Session, e.Src, e.Epoch)
	if e.Kind == KindFence {
		return off, true
	}
	if e.Kind == KindRecord {
		pm.parkAt[e.Src] = off // the last copy: the rebuild reads it until the park position passes it
	}
	if pm.rng.IntN(25) == 0 {
		pm.crash()
		return off, false
	}
	if e.Kind != KindRecord && e.Kind != KindRelease { // a done or hold marker makes the session's events through it durable...
		if !pm.commit.live { // ...once a commit says where the group's entries start
			pm.unsure = append(pm.unsure, e)
		} else {
			pm.marked(e)
		}
	}
	return off, true
}

// marked makes the events of e's session through e's source offset
// durable: a rebuild reads marker e.
func (pm *parkModel) marked(e pmEntry) {
	for o := range pm.src {
		if pm.src[o] == e.Session && int64(o) <= e.Src && pm.events[int64(o)] > 0 {
			pm.durable[int64(o)] = true
		}
	}
}

// failing says whether an attempt of s fails now.
func (pm *parkModel) failing(s string) bool {
	if pm.stuck[s] {
		return pm.rng.IntN(10) < 9
	}
	return pm.rng.IntN(20) == 0
}

func (pm *parkModel) fetch() {
	m := pm.m
	if m.pos >= int64(len(pm.src)) {
		return
	}
	o := m.pos
	m.pos++
	if pm.cdone[o] {
		m.done[o] = true
		return
	}
	s := pm.src[o]
	m.lanes[s] = append(m.lanes[s], pmItem{src: o})
}

// laneStep runs the head of s's lane one step, as the consumer's lane does.
func (pm *parkModel) laneStep(s string) {
	m := pm.m
	it := m.lanes[s][0]
	pop := func() { m.lanes[s] = m.lanes[s][1:] }
	if it.retry {
		pm.retry(s)
		if pm.m == m {
			pop()
		}
		return
	}
	o := it.src
	switch {
	case m.ps.Seen(s, o):
		pm.step("seen %d", o)
		m.done[o] = true
		pop()
	case m.ps.IsParked(s):
		if pm.parkRecord(s, o) {
			pop()
		}
	case pm.failing(s):
		m.fails[o]++
		if m.fails[o] >= pmAfterAttempts || pm.rng.IntN(30) == 0 { // past the threshold, or Park(err)
			if pm.parkRecord(s, o) {
				pop()
			}
		}
	default:
		pm.event(o, "handled")
		m.done[o] = true
		pop()
	}
}

// parkRecord writes the copy of o and, once acknowledged, adds it and
// marks the source record done, in one step. False after a crash.
func (pm *parkModel) parkRecord(s string, o int64) bool {
	if pm.rng.IntN(15) == 0 { // a write that timed out here and landed anyway: a second copy follows
		pm.park = append(pm.park, pmEntry{Kind: KindRecord, Session: s, Src: o})
		pm.step("park[%d] r %s %d (timed out, landed)", len(pm.park)-1, s, o)
	}
	off, ok := pm.write(pmEntry{Kind: KindRecord, Session: s, Src: o})
	if !ok {
		return false
	}
	pm.m.ps.Add(s, off, o, pm.now)
	pm.m.done[o] = true
	return true
}

// retry runs a retry of s's parked head.
func (pm *parkModel) retry(s string) {
	m := pm.m
	h, ok := m.ps.Head(s)
	if !ok {
		m.ps.RetryAbandoned(s)
		return
	}
	if !pm.failing(s) {
		pm.event(h.SrcOffset, "handled from park")
		if off, ok := pm.write(pmEntry{Kind: KindDone, Session: s, Src: h.SrcOffset}); ok {
			pm.doneThenNext(s, h.SrcOffset, off)
		}
		return
	}
	m.parkFails[h.SrcOffset]++
	n := m.parkFails[h.SrcOffset]
	spent := n >= m.ps.rules.MaxAttempts
	if dead := m.ps.Failed(s, pm.now); dead != spent {
		pm.fail("record %d: failed retry %d of %d: dead-letter %v", h.SrcOffset, n, m.ps.rules.MaxAttempts, dead)
	}
	if !spent {
		pm.parkFails[h.SrcOffset] = n // the marker lands, whether or not its writer sees it acknowledged
		pm.write(pmEntry{Kind: KindAttempt, Session: s, Src: h.SrcOffset, Retries: n})
		return
	}
	pm.dlq = append(pm.dlq, h.SrcOffset)
	pm.event(h.SrcOffset, "dead-lettered")
	if pm.rng.IntN(25) == 0 {
		pm.crash() // after the DLQ write, before its marker
		return
	}
	if m.ps.rules.Hold {
		if off, ok := pm.write(pmEntry{Kind: KindHold, Session: s, Src: h.SrcOffset}); ok {
			m.ps.Held(s, h.SrcOffset, off)
		}
		return
	}
	if off, ok := pm.write(pmEntry{Kind: KindDone, Session: s, Src: h.SrcOffset}); ok {
		pm.doneThenNext(s, h.SrcOffset, off)
	}
}

// doneThenNext applies a done marker and, as the consumer does
// (partition.parkMarked), queues the retry of the next head at once when
// it is due, behind the retry under way.
func (pm *parkModel) doneThenNext(s string, through, off int64) {
	pm.m.ps.Done(s, through, off, pm.now)
	if pm.m.ps.DueNow(s, pm.now) {
		pm.queueRetry(s, true)
	}
}

// queueRetry queues a retry of s's parked head in its lane: never while
// another is queued (besides the one under way, when chained).
func (pm *parkModel) queueRetry(s string, chained bool) {
	n := 0
	for _, it := range pm.m.lanes[s] {
		if it.retry {
			n++
		}
	}
	if chained {
		n-- // the retry under way: popped once it returns
	}
	if n > 0 {
		pm.fail("session %s: a retry queued (chained %v) while %d other(s) wait in its lane", s, chained, n)
	}
	pm.step("retry %s queued (chained %v)", s, chained)
	pm.m.lanes[s] = append(pm.m.lanes[s], pmItem{retry: true})
}

// tick moves time on and queues the retries that are due.
func (pm *parkModel) tick() {
	pm.now = pm.now.Add(time.Duration(pm.rng.IntN(3000)) * time.Millisecond)
	due := pm.m.ps.Due(pm.now)
	slicesSort(due)
	for _, s := range due {
		pm.queueRetry(s, false)
	}
}

// commitNow commits the watermark, the completed offsets above it and the
// park position: one snapshot.
func (pm *parkModel) commitNow() {
	m := pm.m
	wm := pm.commit.wm
	for wm < m.pos && m.done[wm] {
		wm++
	}
	pos := m.ps.Position()
	pm.commit = pmCommit{wm: wm, pc: Committed{Pos: pos, Fence: m.ps.CommitFence(pos), TopicID: pm.topicID, ParkTopicID: pm.parkIDNow()}, live: true}
	cdone := map[int64]bool{}
	for o := wm; o < int64(len(pm.src)); o++ {
		if m.done[o] || (o >= m.pos && pm.cdone[o]) { // not yet fetched: still completed
			cdone[o] = true
		}
	}
	pm.cdone = cdone
	pm.step("commit wm %d pp %d in force %+v", wm, pos, pm.commit.pc.Fence)
	for _, e := range pm.unsure {
		pm.marked(e)
	}
	pm.unsure = nil
	for o := range pm.src {
		o := int64(o)
		if pm.events[o] == 0 {
			continue
		}
		last, parked := pm.parkAt[o]
		if (o < wm || pm.cdone[o]) && (!parked || last < pos) {
			pm.durable[o] = true
		}
	}
	m.ps.ForgetBelow(wm)
}

func (pm *parkModel) randomStep() {
	switch {
	case pm.rng.IntN(120) == 0:
		pm.stopped()
		return
	case pm.rng.IntN(25) == 0:
		pm.foreign()
		return
	}
	m := pm.m
	switch r := pm.rng.IntN(100); {
	case r < 30:
		pm.fetch()
	case r < 70:
		var busy []string
		for s, q := range m.lanes {
			if len(q) > 0 {
				busy = append(busy, s)
			}
		}
		if len(busy) > 0 {
			slicesSort(busy)
			pm.laneStep(busy[pm.rng.IntN(len(busy))])
		}
	case r < 82:
		pm.tick()
	case r < 90:
		pm.commitNow()
	case r < 93:
		s := pm.src[pm.rng.IntN(len(pm.src))]
		pm.stuck[s] = !pm.stuck[s]
	case r < 95:
		pm.crash()
	case r < 98:
		pm.step("revoke")
		pm.commitNow()
		pm.restart() // a clean hand-over: the next owner starts from this commit
	default:
		var held []string
		for s := range m.ps.sessions {
			held = append(held, s)
		}
		slicesSort(held)
		for _, s := range held {
			ss := m.ps.sessions[s]
			if ss == nil || !ss.held {
				continue
			}
			if pm.rng.IntN(2) == 0 { // the member's release (Consumer.ReleaseParked): its marker, under the owner's epoch, applied once acknowledged
				off, ok := pm.write(pmEntry{Kind: KindRelease, Session: s})
				if !ok {
					return // crashed before its acknowledgement: the next owner replays it
				}
				if m.ps.ApplyRelease(off, pm.park[off], pm.now) {
					pm.step("the owner releases %s", s)
				}
				continue
			}
			// lanes park release: a marker the owner picks up, or its next owner replays
			pm.park = append(pm.park, pmEntry{Kind: KindRelease, Group: pmGroup, Session: s, Epoch: -1})
			pm.step("park[%d] l %s (an operator's release marker)", len(pm.park)-1, s)
			if pm.rng.IntN(3) == 0 {
				pm.crash() // before the owner picked it up
				return
			}
			if m.ps.Release(s, pm.now) {
				pm.step("operator releases %s", s)
			}
		}
	}
}

// finish stops the failures and runs to quiescence: every record fetched,
// every lane empty, no session parked (held ones released by an operator).
func (pm *parkModel) finish() {
	clear(pm.stuck)
	for range 100000 {
		m := pm.m
		if m.pos < int64(len(pm.src)) {
			pm.fetch()
			continue
		}
		var busy []string
		for s, q := range m.lanes {
			if len(q) > 0 {
				busy = append(busy, s)
			}
		}
		if len(busy) > 0 {
			slicesSort(busy)
			pm.laneStep(busy[0])
			continue
		}
		if m.ps.Counts(pm.now).Sessions == 0 {
			return
		}
		for s := range m.ps.sessions {
			m.ps.Release(s, pm.now)
		}
		pm.now = pm.now.Add(10 * time.Second)
		pm.tick()
	}
	pm.fail("no quiescence: %d sessions still parked", pm.m.ps.Counts(pm.now).Sessions)
}

func slicesSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestParkModel(t *testing.T) {
	seeds := longtest.Size(t, 500, 100)
	seen := map[string]int{}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			pm := newParkModel(t, seed, seen)
			for range 600 {
				pm.randomStep()
			}
			pm.finish()
			for o := int(pm.from); o < len(pm.src); o++ {
				if pm.events[int64(o)] == 0 {
					pm.fail("seed %d: record %d (%s #%d) lost: never handled nor dead-lettered", seed, o, pm.src[o], pm.idx[o])
				}
			}
			if n := pm.m.ps.Counts(pm.now).Sessions; pm.m.ps.records != 0 || n != 0 {
				pm.fail("seed %d: %d records of %d sessions left parked", seed, pm.m.ps.records, n)
			}
		})
	}
	keys := slices.Sorted(maps.Keys(seen))
	for _, k := range keys {
		t.Logf("%6d %s", seen[k], k)
	}
}
