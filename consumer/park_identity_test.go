package consumer

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestParkLateFence: a fence written by an owner that lost the partition
// (its retried rebuild racing the revoke) lands after the new owner's:
// its generation is older, so it is not in force; the new owner's later
// entries count and the former owner's entries under its late fence do
// not.
func TestParkLateFence(t *testing.T) {
	rules := parkRules{delay: time.Second, maxDelay: time.Minute, maxAttempts: 5}
	now := time.Unix(1e9, 0)
	ps := newParkSet(rules, "g")
	ps.w.topicID = "id1"
	for _, tc := range []struct {
		off  int64
		e    parkEntry
		want bool
	}{
		{0, parkEntry{kind: parkFence, group: "g", gen: 3, topicID: "id1"}, true},            // A
		{1, parkEntry{kind: parkRecord, group: "g", session: "a", src: 10, epoch: 0}, true},  // A parks a
		{2, parkEntry{kind: parkFence, group: "g", gen: 5, topicID: "id1"}, true},            // B takes the partition
		{3, parkEntry{kind: parkFence, group: "g", gen: 3, topicID: "id1"}, false},           // A's fence, late
		{4, parkEntry{kind: parkRecord, group: "g", session: "a", src: 11, epoch: 2}, true},  // B forwards a's next
		{5, parkEntry{kind: parkDone, group: "g", session: "a", src: 11, epoch: 3}, false},   // A, under its late fence
		{6, parkEntry{kind: parkRecord, group: "g", session: "b", src: 12, epoch: 0}, false}, // A, under its first fence
		{7, parkEntry{kind: parkFence, group: "g", gen: 9, topicID: "id0"}, false},           // a fence of the topic's earlier incarnation
		{8, parkEntry{kind: parkFence, group: "h", gen: 50, topicID: "id1"}, false},          // another group's
		{9, parkEntry{kind: parkDone, group: "h", session: "a", src: 11, epoch: 8}, false},   // and its marker
		{10, parkEntry{kind: parkDone, session: "a", src: 11, epoch: 2}, false},              // a writer naming no group
		{11, parkEntry{kind: parkRelease, group: "h", session: "a", epoch: -1}, false},       // another group's release
		{12, parkEntry{kind: parkRelease, group: "g", session: "a", epoch: -1}, true},        // an operator's, under no fence
	} {
		if got := ps.replay(tc.off, tc.e, now); got != tc.want {
			t.Fatalf("replay(%d, %+v) = %v; want %v", tc.off, tc.e, got, tc.want)
		}
	}
	if ps.epoch() != 2 || ps.records != 2 || !ps.isParked("a") || ps.isParked("b") {
		t.Fatalf("epoch %d, %d records, a parked %v, b parked %v; want B's fence (2) in force and a's two records parked",
			ps.epoch(), ps.records, ps.isParked("a"), ps.isParked("b"))
	}
	if pos, f := ps.position(), ps.w.at(ps.position()); pos != 1 || f != (fenceMark{0, 3}) {
		t.Fatalf("position %d with fence %+v in force; want 1 with A's fence {0 3}", pos, f)
	}
}

// TestParkCommitWaitsForPosition: a partition with parking whose
// committed offsets could not be read at assignment commits nothing (a
// commit would drop its park position) until its rebuild reads them; a
// partition with parking off keeps the park section it found in its
// commits.
func TestParkCommitWaitsForPosition(t *testing.T) {
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil)
	p.enablePark(parkRules{delay: time.Second, maxDelay: time.Second, maxAttempts: 1}, "g", 4)
	p.startAt(0)
	if cp, ok := p.toCommit(4096); ok {
		t.Fatalf("committed %+v before the park position was read", cp)
	}
	if p.parkCommitted(";park2:7,3,2,") {
		t.Fatal("a section reported kept with parking on")
	}
	p.mu.Lock()
	p.pk.set.begin(7, p.pk.from.fence)
	p.pk.set.replay(9, parkEntry{kind: parkFence, group: "g", gen: 4}, time.Now())
	p.mu.Unlock()
	cp, ok := p.toCommit(4096)
	if _, pc, found := splitParkMeta(cp.meta); !ok || !found || pc != (parkCommit{10, fenceMark{9, 4}, ""}) {
		t.Fatalf("commit %+v (%v): park section %+v", cp, ok, pc)
	}

	off := newPartition(context.Background(), partKey{"t", 1}, 1, 10, nil)
	if !off.parkCommitted("lanes1:x;park2:7,3,2,ab") {
		t.Fatal("parking off: a committed park section not reported")
	}
	off.startAt(0)
	if cp, ok := off.toCommit(4096); !ok || !strings.HasSuffix(cp.meta, ";park2:7,3,2,ab") {
		t.Fatalf("parking off: commit %+v (%v) drops the park section", cp, ok)
	}
}
