package parkset

import (
	"testing"
	"time"
)

// TestParkLateFence: a fence written by an owner that lost the partition
// (its retried rebuild racing the revoke) lands after the new owner's:
// its generation is older, so it is not in force; the new owner's later
// entries count and the former owner's entries under its late fence do
// not.
func TestParkLateFence(t *testing.T) {
	rules := Rules{Delay: time.Second, MaxDelay: time.Minute, MaxAttempts: 5}
	now := time.Unix(1e9, 0)
	ps := New(rules, "g")
	ps.SetTopicID("id1")
	for _, tc := range []struct {
		off  int64
		e    Entry
		want bool
	}{
		{0, Entry{Kind: KindFence, Group: "g", Gen: 3, TopicID: "id1"}, true},            // A
		{1, Entry{Kind: KindRecord, Group: "g", Session: "a", Src: 10, Epoch: 0}, true},  // A parks a
		{2, Entry{Kind: KindFence, Group: "g", Gen: 5, TopicID: "id1"}, true},            // B takes the partition
		{3, Entry{Kind: KindFence, Group: "g", Gen: 3, TopicID: "id1"}, false},           // A's fence, late
		{4, Entry{Kind: KindRecord, Group: "g", Session: "a", Src: 11, Epoch: 2}, true},  // B forwards a's next
		{5, Entry{Kind: KindDone, Group: "g", Session: "a", Src: 11, Epoch: 3}, false},   // A, under its late fence
		{6, Entry{Kind: KindRecord, Group: "g", Session: "b", Src: 12, Epoch: 0}, false}, // A, under its first fence
		{7, Entry{Kind: KindFence, Group: "g", Gen: 9, TopicID: "id0"}, false},           // a fence of the topic's earlier incarnation
		{8, Entry{Kind: KindFence, Group: "h", Gen: 50, TopicID: "id1"}, false},          // another group's
		{9, Entry{Kind: KindDone, Group: "h", Session: "a", Src: 11, Epoch: 8}, false},   // and its marker
		{10, Entry{Kind: KindDone, Session: "a", Src: 11, Epoch: 2}, false},              // a writer naming no group
		{11, Entry{Kind: KindRelease, Group: "h", Session: "a", Epoch: -1}, false},       // another group's release
		{12, Entry{Kind: KindRelease, Group: "g", Session: "a", Epoch: -1}, true},        // an operator's, under no fence
		{13, Entry{Kind: KindRelease, Group: "g", Session: "a", Epoch: 2}, true},         // the owner's (ReleaseParked), under its fence
		{14, Entry{Kind: KindRelease, Group: "g", Session: "a", Epoch: 3}, true},         // a former owner's, written late: an operator's decision still
	} {
		if got := ps.Replay(tc.off, tc.e, now); got != tc.want {
			t.Fatalf("replay(%d, %+v) = %v; want %v", tc.off, tc.e, got, tc.want)
		}
	}
	if ps.Epoch() != 2 || ps.records != 2 || !ps.IsParked("a") || ps.IsParked("b") {
		t.Fatalf("epoch %d, %d records, a parked %v, b parked %v; want B's fence (2) in force and a's two records parked",
			ps.Epoch(), ps.records, ps.IsParked("a"), ps.IsParked("b"))
	}
	if pos, f := ps.Position(), ps.w.at(ps.Position()); pos != 1 || f != (Fence{0, 3, ""}) {
		t.Fatalf("position %d with fence %+v in force; want 1 with A's fence {0 3}", pos, f)
	}
}
