package consumer

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
)

// The sections of lanes' commit metadata after the completed offsets
// (internal/offsets): the growth section (growth.go), then the park
// section (park_state.go), each found by its separator.

// growCommit is the growth section of one partition's commit: its
// committer's history and, during a change, its floors for the levels
// hist.Counts[1:] and the sessions parked on it with records placed by an
// older count than the newest.
type growCommit struct {
	hist   regrow.History
	floors []int64
	parked parkedOld
}

// parkedOld names the sessions parked on a partition with a record placed
// by a count older than its topic's newest, each with the oldest count of
// its parked records (sorted by regrow.SessionHash); or all of them, with
// the oldest count among them (all: too many to name), or all with no
// count known (all, level 0: its parked set not rebuilt, and no commit
// named them).
type parkedOld struct {
	named []parkedAt
	all   bool
	level int // with all: the oldest count of any session's parked records
}

// parkedAt is a session named parked (its hash) with the oldest count of
// its parked records.
type parkedAt struct {
	hash  uint32
	level int
}

// maxParkedNamed is how many parked sessions a commit names before it says
// "all" instead: the section stays within about a kilobyte of the commit
// metadata's MaxCommitMetadataBytes.
const maxParkedNamed = 64

// has reports whether session may be parked with a record placed by a
// count older than level.
func (po parkedOld) has(session string, level int) bool {
	if po.all {
		return po.level < level
	}
	i, ok := slices.BinarySearchFunc(po.named, regrow.SessionHash(session), func(p parkedAt, h uint32) int { return cmp.Compare(p.hash, h) })
	return ok && po.named[i].level < level
}

func (po parkedOld) none() bool { return !po.all && len(po.named) == 0 }

// Commit metadata: the growth section, before the park section:
// ";grow1:<history segment>" and, during a change, ":<floor>,…", the
// partition's floors for the history's counts after the oldest, then,
// when sessions are parked on it with records placed by an older count
// than the newest, ":<hash>@<count>,…" (the hash hexadecimal; the count
// the oldest of the session's parked records) or ":*@<count>" (all).
const growMetaSep = ";grow1:"

// growMeta is the growth section of a commit with history h, floors and
// the sessions parked with older records.
func growMeta(h regrow.History, floors []int64, parked parkedOld) string {
	seg := h.Segment()
	if seg == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(growMetaSep)
	b.WriteString(seg)
	for i, f := range floors {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(f, 10))
	}
	if len(floors) > 0 && !parked.none() {
		b.WriteByte(':')
		if parked.all {
			b.WriteString("*@" + strconv.Itoa(parked.level))
		}
		for i, x := range parked.named {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatUint(uint64(x.hash), 16) + "@" + strconv.Itoa(x.level))
		}
	}
	return b.String()
}

// splitGrowMeta reads the growth section of commit metadata (the park
// section, after it, cut off); ok is false when there is none or it is
// not one this version reads.
func splitGrowMeta(meta string) (growCommit, bool) {
	_, sec, found := strings.Cut(meta, growMetaSep)
	if !found {
		return growCommit{}, false
	}
	sec, _, _ = strings.Cut(sec, parkMetaSep)
	seg, fl, hasFloors := strings.Cut(sec, ":")
	h, err := regrow.ParseSegment(seg)
	if err != nil || hasFloors != h.Changing() {
		return growCommit{}, false
	}
	gc := growCommit{hist: h}
	if hasFloors {
		fl, pk, hasParked := strings.Cut(fl, ":")
		if hasParked {
			var ok bool
			if gc.parked, ok = parseParked(pk); !ok {
				return growCommit{}, false
			}
		}
		for f := range strings.SplitSeq(fl, ",") {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 {
				return growCommit{}, false
			}
			gc.floors = append(gc.floors, v)
		}
		if len(gc.floors) != len(h.Counts)-1 {
			return growCommit{}, false
		}
	}
	return gc, true
}

// parseParked reads the parked sessions of a growth section.
func parseParked(s string) (parkedOld, bool) {
	if lv, ok := strings.CutPrefix(s, "*@"); ok {
		n, err := strconv.Atoi(lv)
		return parkedOld{all: true, level: n}, err == nil && n >= 0
	}
	var po parkedOld
	for x := range strings.SplitSeq(s, ",") {
		h, lv, ok := strings.Cut(x, "@")
		v, err := strconv.ParseUint(h, 16, 32)
		n, err2 := strconv.Atoi(lv)
		if !ok || err != nil || err2 != nil || n < 0 {
			return parkedOld{}, false
		}
		po.named = append(po.named, parkedAt{uint32(v), n})
	}
	if !slices.IsSortedFunc(po.named, func(a, b parkedAt) int { return cmp.Compare(a.hash, b.hash) }) {
		return parkedOld{}, false
	}
	return po, true
}

// growSection is the growth section of commit metadata as written ("":
// none), for a member that takes the partition over to tell whether its
// own section says anything new.
func growSection(meta string) string {
	_, sec, found := strings.Cut(meta, growMetaSep)
	if !found {
		return ""
	}
	sec, _, _ = strings.Cut(sec, parkMetaSep)
	return growMetaSep + sec
}

// cutGrowMeta removes the growth section from commit metadata, for the
// readers of the sections around it.
func cutGrowMeta(meta string) string {
	before, sec, found := strings.Cut(meta, growMetaSep)
	if !found {
		return meta
	}
	if _, park, ok := strings.Cut(sec, parkMetaSep); ok {
		return before + parkMetaSep + park
	}
	return before
}

// Commit metadata: lanes' completed offsets (internal/offsets), then the park
// section: ";park2:<position>,<fence>,<generation>,<protocol>,<topic
// ID>,<park topic ID>", the park position and the fence in force there
// (park offset, generation and the group protocol it is of), and the IDs
// of the source and park topics ("" unknown).
const parkMetaSep = ";park2:"
