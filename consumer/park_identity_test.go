package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// TestParkCommitWaitsForPosition: a partition with parking whose
// committed offsets could not be read at assignment commits nothing (a
// commit would drop its park position) until its rebuild reads them;
// before its rebuild it commits the section it found, none when it found
// none (never the empty set's position 0, which would have the next owner
// read the park partition from its start); a partition with parking off
// keeps the park section it found in its commits, and commits nothing
// while it could not read whether there is one.
func TestParkCommitWaitsForPosition(t *testing.T) {
	sectionOf := func(p *partition) (string, bool) {
		cp, ok := p.toCommit(4096)
		_, pc, found := splitParkMeta(cp.meta)
		if !found {
			return "", ok
		}
		return pc.String(), ok
	}
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil)
	p.enablePark(parkset.Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 1}, "g", 4, "classic")
	p.startAt(0)
	if s, ok := sectionOf(p); ok {
		t.Fatalf("committed (park section %q) before the park position was read", s)
	}
	p.parkCommitted("") // read: a fresh partition
	if s, ok := sectionOf(p); !ok || s != "" {
		t.Fatalf("fresh partition before its rebuild: committed %v with park section %q; want none", ok, s)
	}
	if p.parkCommitted(";park2:7,3,2,classic,,") {
		t.Fatal("a section reported kept with parking on")
	}
	p.tr.Touch()
	if s, ok := sectionOf(p); !ok || s != ";park2:7,3,2,classic,," {
		t.Fatalf("before its rebuild: committed %v with park section %q; want the one found", ok, s)
	}
	p.mu.Lock()
	p.pk.set.Begin(7, p.pk.from.fence)
	p.pk.set.Replay(9, parkset.Entry{Kind: parkset.KindFence, Group: "g", Gen: 4, Proto: "classic"}, time.Now())
	p.pk.rebuilt = true
	p.tr.Touch()
	p.mu.Unlock()
	if s, ok := sectionOf(p); !ok || s != ";park2:10,9,4,classic,," {
		t.Fatalf("rebuilt: committed %v with park section %q; want the set's", ok, s)
	}

	off := newPartition(context.Background(), partKey{"t", 1}, 1, 10, nil)
	parkUnread([]*partition{off})
	off.startAt(0)
	if _, ok := off.toCommit(4096); ok {
		t.Fatal("parking off: committed before it could read whether the group's commit holds a park section")
	}
	if !off.parkCommitted("lanes1:x;park2:7,3,2,classic,ab,") {
		t.Fatal("parking off: a committed park section not reported")
	}
	if cp, ok := off.toCommit(4096); !ok || !strings.HasSuffix(cp.meta, ";park2:7,3,2,classic,ab,") {
		t.Fatalf("parking off: commit %+v (%v) drops the park section", cp, ok)
	}
}

// parkWorld writes entries to park partition chats.park/0 as group's
// members would and commits section (with the source at offset 0) for
// group: the state a rebuild finds.
func parkWorld(t *testing.T, e *env, group, section string, entries ...func(io *parkIO) *kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cl := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	io := newParkIO(&Config{Group: group, Park: ParkPolicy{TopicSuffix: DefaultParkTopicSuffix}})
	for _, mk := range entries {
		if err := cl.ProduceSync(ctx, mk(io)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "chats", Partition: 0, At: 0, LeaderEpoch: -1, Metadata: section})
	resps, err := kadm.NewClient(cl).CommitOffsets(ctx, group, to)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// allParkEntries reads every entry of park partition chats.park/0 through
// c's park client.
func allParkEntries(t *testing.T, e *env, c *Consumer) []loggedEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ends, err := kadm.NewClient(e.client()).ListEndOffsets(ctx, "chats.park")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("chats.park", 0)
	entries, err := c.park.entries(ctx, "chats.park", 0, 0, end.Offset, func(*kgo.Record, error) {})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// committedSection is the park section of group's commit of chats/0.
func committedSection(t *testing.T, e *env, group string) parkCommit {
	t.Helper()
	resps, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := resps.Lookup("chats", 0)
	_, pc, _ := splitParkMeta(r.Metadata)
	return pc
}

// runChats runs a consumer of group with parking on until the five
// messages of session s are handled, in order, then stops it.
func runChats(t *testing.T, e *env, group string) *Consumer {
	t.Helper()
	rec := newRecorder(5, nil)
	cfg := e.config(group, "chats")
	cfg.Park.Enabled = true
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "the handled messages committed", func() bool { return committedSection(t, e, group).pos >= 0 && c.Stats().Partitions[0].Committed == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, []string{"s"}, 5)
	return c
}

// TestParkGenerationsStartAgain: the group's commit names a fence of
// generation 999 of the other group protocol (before an empty consumer
// group became a classic one, whose generations start again near 1): the
// new owner's own fence is below it; it writes a reset fence, which is in
// force, and handles its partition instead of holding it for good.
func TestParkGenerationsStartAgain(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	produceSeqs(t, e, "chats", "s", 0, 5)
	parkWorld(t, e, "g-gen", ";park2:1,0,999,consumer,,", func(io *parkIO) *kgo.Record { return io.w.Fence("chats", 0, 999, "consumer", "", false) })
	runChats(t, e, "g-gen")
	if pc := committedSection(t, e, "g-gen"); pc.fence.Gen >= 999 || pc.fence.Off < 1 {
		t.Fatalf("committed park section %+v; want this owner's reset fence in force", pc)
	}
}

// TestParkTopicMadeAgain: the group's commit names a park position of a
// park topic since deleted and made again (another park topic ID), or
// past the park partition's end (truncated): nothing in the park
// partition is the group's, not even a copy of its own group's that names
// the session's first record (which would otherwise be skipped as done
// before), and the position committed after is within the park
// partition.
func TestParkTopicMadeAgain(t *testing.T) {
	for _, tc := range []struct{ name, section string }{
		{"another park topic ID", ";park2:1,0,1,classic,,ffffffffffffffffffffffffffffffff"},
		{"past the end", ";park2:1000,0,1,classic,,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "chats.park", "dlq")
			produceSeqs(t, e, "chats", "s", 0, 5)
			parkWorld(t, e, "g-made-again", tc.section,
				func(io *parkIO) *kgo.Record { return io.w.Fence("chats", 0, 1, "classic", "", false) },
				func(io *parkIO) *kgo.Record {
					return io.w.Copy(&kgo.Record{Topic: "chats", Offset: 0, Key: []byte("s"), Value: []byte("s|0")}, "s", 0, 1, time.Now(), time.Now(), "old")
				},
				func(io *parkIO) *kgo.Record { return io.w.Marker(parkset.KindHold, "chats", 0, "s", 0, 0) })
			runChats(t, e, "g-made-again")
			if pc := committedSection(t, e, "g-made-again"); pc.pos < 0 || pc.pos > 10 || pc.ids.park == "ffffffffffffffffffffffffffffffff" {
				t.Fatalf("committed park section %+v; want one within the park partition, of its park topic", pc)
			}
		})
	}
}

// TestParkLateOwnFence: a later owner's fence, of this group protocol and
// a higher generation, is in force in the park partition after the
// committed position when this member's own fence lands (it lost the
// partition while taking it up: its assignment callback outlived the
// rebalance timeout). The member is not the owner: it writes no reset
// fence (which would put it in force over the real owner's, whose later
// entries every rebuild would then ignore), handles nothing of the
// partition and says why in Health, until the group takes it away.
func TestParkLateOwnFence(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	produceSeqs(t, e, "chats", "s", 0, 5)
	parkWorld(t, e, "g-late", ";park2:1,0,1,classic,,",
		func(io *parkIO) *kgo.Record { return io.w.Fence("chats", 0, 1, "classic", "", false) },
		func(io *parkIO) *kgo.Record { return io.w.Fence("chats", 0, 999, "classic", "", false) })
	rec := newRecorder(5, nil)
	cfg := e.config("g-late", "chats")
	cfg.Park.Enabled = true
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the partition held: a later owner's fence in force", func() bool {
		for _, r := range c.Health().Reasons {
			if strings.Contains(r, "lost the partition") {
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.snapshot()); n != 0 {
		t.Errorf("%d handler calls on a partition this member lost; want none", n)
	}
	entries := allParkEntries(t, e, c)
	if len(entries) < 3 {
		t.Fatalf("park partition holds %d entries; want the two fences written and this member's own", len(entries))
	}
	for _, le := range entries {
		if le.e.Reset {
			t.Errorf("a reset fence at park offset %d: this member put itself in force over the partition's owner", le.off)
		}
	}
}
