package consumer

import (
	"strconv"
	"strings"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
)

// The sections of lanes' commit metadata after the completed offsets
// (internal/offsets): the growth section (growth.go), then the park
// section (park_state.go), each found by its separator.

// growCommit is the growth section of one partition's commit: its
// committer's history and, during a change, its floors for the levels
// hist.Counts[1:].
type growCommit struct {
	hist   regrow.History
	floors []int64
}

// Commit metadata: the growth section, before the park section:
// ";grow1:<history segment>" and, during a change, ":<floor>,…", the
// partition's floors for the history's counts after the oldest.
const growMetaSep = ";grow1:"

// growMeta is the growth section of a commit with history h and floors.
func growMeta(h regrow.History, floors []int64) string {
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
