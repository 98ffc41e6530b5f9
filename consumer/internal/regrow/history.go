package regrow

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

// History is what a member knows of one topic's partition counts.
type History struct {
	// Counts are the counts whose records may still be unhandled,
	// ascending; the last is the topic's newest count. Empty: unknown.
	Counts []int
	// Since is when the newest count was first known, while there are
	// older ones (zero otherwise).
	Since time.Time
	// Settled says that a change to the newest count was settled: every
	// record stamped with an older count is handled.
	Settled bool
}

// ErrBadSegment is returned by ParseSegment for text that is not a
// history segment.
var ErrBadSegment = errors.New("regrow: bad history segment")

// Changing reports whether h still holds an older count than its newest:
// a change whose records may be unhandled.
func (h History) Changing() bool { return len(h.Counts) > 1 }

// Newest is the newest count (0: unknown).
func (h History) Newest() int {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Learn merges counts known since since (zero: not known when) into h, at
// now. A count newer than h's newest starts a change, known since since
// (or now). It reports whether h changed.
//
// A settled history ignores counts no newer than its newest: a commit
// written before the change settled must not open it again.
func (h *History) Learn(counts []int, since, now time.Time) bool {
	before := h.Newest()
	if h.Settled && maxOf(counts) <= before {
		return false
	}
	changed := false
	for _, c := range counts {
		if c < 1 || slices.Contains(h.Counts, c) {
			continue
		}
		i, _ := slices.BinarySearch(h.Counts, c)
		h.Counts = slices.Insert(h.Counts, i, c)
		changed = true
	}
	if h.Newest() > before {
		h.Settled = false
	}
	switch {
	case !h.Changing():
		h.Since = time.Time{}
	case h.Newest() > before || h.Since.IsZero():
		h.Since = cmp.Or(since, now) // a change this member did not know of
		changed = true
	case !since.IsZero() && since.Before(h.Since) && maxOf(counts) == h.Newest():
		h.Since = since // an earlier word of the same change
		changed = true
	}
	return changed
}

// Observe learns the topic's count from its metadata. A count below the
// newest known changes nothing: a listing may be older than a stamp read
// (and a topic made again is told by its ID, not its count).
func (h *History) Observe(count int, now time.Time) bool {
	if count < 1 || count < h.Newest() {
		return false
	}
	return h.Learn([]int{count}, time.Time{}, now)
}

// Settle ends the change: only the newest count is kept, settled.
func (h *History) Settle() {
	if n := h.Newest(); n > 0 {
		*h = History{Counts: []int{n}, Settled: true}
	}
}

// Segment is h as a commit's metadata carries it: "8", "8!" once a change
// to 8 settled, or "2,8@<since in Unix milliseconds>" during a change; ""
// when unknown.
func (h History) Segment() string {
	if len(h.Counts) == 0 {
		return ""
	}
	var b strings.Builder
	for i, c := range h.Counts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	if h.Changing() {
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(h.Since.UnixMilli(), 10))
	} else if h.Settled {
		b.WriteByte('!')
	}
	return b.String()
}

// ParseSegment reads a Segment.
func ParseSegment(s string) (History, error) {
	var h History
	list, at, timed := strings.Cut(s, "@")
	if l, ok := strings.CutSuffix(list, "!"); ok && !timed {
		list, h.Settled = l, true
	}
	for f := range strings.SplitSeq(list, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 1 || len(h.Counts) > 0 && c <= h.Newest() || len(h.Counts) >= maxCounts {
			return History{}, fmt.Errorf("%w: %q", ErrBadSegment, s)
		}
		h.Counts = append(h.Counts, c)
	}
	if timed != h.Changing() || h.Settled && h.Changing() {
		return History{}, fmt.Errorf("%w: %q", ErrBadSegment, s)
	}
	if timed {
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil || ms <= 0 {
			return History{}, fmt.Errorf("%w: %q", ErrBadSegment, s)
		}
		h.Since = time.UnixMilli(ms)
	}
	return h, nil
}

// maxCounts bounds the counts a segment may list, against hostile input.
const maxCounts = 64

// OldHomes are the partitions other than p that key had, with pl's
// scheme, under every count from h's oldest up to pl's: where records of
// key's session stamped pl may have older records. Every count between,
// not only h's: the topic may have grown twice between two looks at it,
// and a count no member saw still placed records. A record whose stamp is
// not newer than h's oldest count has none.
func OldHomes(h History, pl hashring.Placement, key []byte, p int32) []int32 {
	var out []int32
	if len(h.Counts) == 0 {
		return nil
	}
	for c := h.Counts[0]; c < pl.Count; c++ {
		q, err := pl.Partition(key, c)
		if err == nil && int32(q) != p && !slices.Contains(out, int32(q)) {
			out = append(out, int32(q))
		}
	}
	return out
}

func maxOf(cs []int) int {
	m := 0
	for _, c := range cs {
		m = max(m, c)
	}
	return m
}
