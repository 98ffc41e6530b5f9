package consumer

import (
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkahead"
	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// A partition's parking state (partPark) and the park section of its
// group's commit (parkCommit); the rules over them, on the partition, are
// park_partition.go's.

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
	tail        int64               // where the next look for release markers starts (park_release.go)
	unavailable error               // the rebuild failed: nothing of the partition starts
	retryAt     time.Time           // when the park loop tries the rebuild again
	retries     int                 // rebuilds failed in a row
	ahead       parkahead.ReadAhead // parked copies read along with a head
	levels      parkLevels          // the placement counts of the parked records (park_levels.go)
}

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

// splitParkMeta separates the park section from commit metadata; ok is
// false when there is none (or it is not one this version reads).
func splitParkMeta(meta string) (rest string, pc parkCommit, ok bool) {
	meta = cutGrowMeta(meta)
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
