package consumer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
	"github.com/lanesdev/lanes/hashring"
)

// TestGrowthAfterRecreatedSmaller: a topic of 6 partitions is deleted and
// made again with 2 (operations.md: to change its partition count), then
// grows to 4. A session the growth moves from q to p has 3 records on q
// (stamped 2), held back behind a blocked record by backpressure, and 3
// on p (stamped 4): those wait as moved until the ones on q are handled,
// and the session's 6 calls run in order. Before the fix the old topic's
// count (6) stayed in the member's growth state: 4 was below it, no change
// began, and the records on p ran first.
func TestGrowthAfterRecreatedSmaller(t *testing.T) {
	const per = 3 // the session's records on each partition
	e := newEnv(t, 6, "chats")
	pl2 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 2}
	pl4 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 4}
	s, q, p := movedSession(2, 4)
	gate := make(chan struct{})
	rec := newRecorder(1+1+30+2*per, heldByGate(gate))
	cfg := e.config("g", "chats")
	cfg.MaxBufferedRecords = 8
	cfg.MaxPollRecords = 4
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	e.produceAt("chats", "old", 0, 5, hashring.Placement{Scheme: hashring.SchemeKafka, Count: 6})
	waitFor(t, "the old topic's record handled", func() bool { return len(rec.snapshot()) == 1 }, nil)
	if h := c.grow.history("chats"); h.Newest() != 6 {
		t.Fatalf("the old topic's history %+v, want its count 6 known", h)
	}

	adm := kadm.NewClient(e.client())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, "chats"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "chats"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "re-subscribed to the new topic's 2 partitions", func() bool { return len(c.Stats().Partitions) == 2 },
		func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })
	e.produceAt("chats", "blocker", 0, q, pl2)
	for i := range 30 {
		e.produceAt("chats", fmt.Sprintf("filler-%d", i), 0, q, pl2)
	}
	for seq := range per {
		e.produceAt("chats", s, seq, q, pl2) // behind the full buffer
	}
	waitFor(t, "q full", func() bool {
		return slices.ContainsFunc(c.Stats().Partitions, func(ps PartitionStats) bool { return ps.Partition == q && ps.Paused })
	}, func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })

	e.grow("chats", 4)
	waitFor(t, "the new partitions assigned", func() bool { return len(c.Stats().Partitions) == 4 }, nil)
	for seq := per; seq < 2*per; seq++ {
		e.produceAt("chats", s, seq, p, pl4)
	}
	ran := func() bool {
		return slices.ContainsFunc(rec.snapshot(), func(x call) bool { return x.session == s })
	}
	waitFor(t, "the session's record on p waiting as moved (or run)", func() bool {
		g := c.Stats().Growing
		return len(g) == 1 && g[0].Waiting == 1 || ran()
	}, func() string {
		return fmt.Sprintf("growing %+v, history %+v", c.Stats().Growing, c.grow.history("chats"))
	})
	close(gate)
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, []string{s}, 2*per)
	if h := c.grow.history("chats"); !slices.Equal(h.Counts, []int{2, 4}) {
		t.Fatalf("the new topic's history %+v, want from 2 to 4", h)
	}
}

// TestGrowthRecreatedForgetsChange: a topic made again, with fewer
// partitions, during a change (2 to 6: a session released on partition 1,
// another still waiting for old partitions 4 and 5): the member forgets
// the old topic's counts, its waits, the sessions released on its
// partitions and its start positions. The new topic's listing of 2
// partitions leaves nothing on (before, the old change waited for the
// ends of partitions 2 to 5 for ever), a listing sent or commits read
// before the re-creation teach nothing, and the new topic's growth to 4 is a
// change, whose moved sessions wait.
func TestGrowthRecreatedForgetsChange(t *testing.T) {
	c := unstarted(t, nil)
	g := c.grow
	now := time.Now()
	at := regrow.Part{Topic: "t", Partition: 1}
	g.learn("t", []int{2, 6}, now.Add(-time.Hour), 0, now)
	gone := g.holds.Enter(at, "gone", 6, []int32{4, 5}, now.Add(-time.Minute))
	for q := range int32(6) {
		g.holds.Measured("t", q, 9, now)
	}
	if r, _ := g.holds.Release(floorsAt{}, false); r != 1 {
		t.Fatalf("%d waits released, want 1", r)
	}
	g.holds.Leave(gone)
	waiting := g.holds.Enter(at, "waiting", 6, []int32{4, 5}, now)
	g.starts = map[regrow.Part]int64{{Topic: "t", Partition: 5}: 0, {Topic: "u", Partition: 5}: 0}

	g.recreated([]string{"t"}, now)
	if g.holds.Len() != 0 || len(c.Stats().Growing) != 0 {
		t.Fatalf("after the re-creation: %d waits, Growing %+v; want none", g.holds.Len(), c.Stats().Growing)
	}
	g.holds.Leave(waiting) // its record ends with its fenced partition
	if h := g.history("t"); len(h.Counts) != 0 {
		t.Fatalf("after the re-creation: history %+v, want empty", h)
	}
	if _, ok := g.starts[regrow.Part{Topic: "t", Partition: 5}]; ok || len(g.starts) != 1 {
		t.Fatalf("after the re-creation: starts %v, want the other topic's only", g.starts)
	}

	later := now.Add(time.Second)
	listing := func(n int32) kadm.ListedOffsets {
		l := kadm.ListedOffsets{"t": {}}
		for q := range n {
			l["t"][q] = kadm.ListedOffset{Topic: "t", Partition: q, Offset: 9}
		}
		return l
	}
	g.measured(listing(6), now.Add(-time.Second), 0)
	if h := g.history("t"); len(h.Counts) != 0 {
		t.Fatalf("a listing sent before the re-creation taught %+v", h)
	}
	old := kadm.OffsetResponses{"t": {0: {Offset: kadm.Offset{Topic: "t", Partition: 0, At: 9,
		Metadata: growMeta(regrow.History{Counts: []int{6}, Settled: true}, nil, parkedOld{})}}}}
	if g.readCommits(old, now.Add(-time.Second)); len(g.history("t").Counts) != 0 {
		t.Fatalf("commits read before the re-creation taught %+v", g.history("t"))
	}
	g.measured(listing(2), later, 0)
	if h := g.history("t"); !slices.Equal(h.Counts, []int{2}) || g.active() {
		t.Fatalf("the new topic listed with 2 partitions: history %+v, active %v; want [2], nothing on", h, g.active())
	}
	g.learn("t", []int{4}, time.Time{}, 0, later)
	if h := g.history("t"); !slices.Equal(h.Counts, []int{2, 4}) {
		t.Fatalf("the new topic grown to 4: history %+v, want [2 4]", h)
	}
	w := g.holds.Enter(at, "gone", 4, []int32{0}, later)
	if w == nil {
		t.Fatal("a session released on the old topic's partition is released on the new one's")
	}
	g.holds.Leave(w)
}

// floorsAt is a regrow.Olds whose partitions all passed every floor, with
// nothing parked.
type floorsAt struct{}

func (floorsAt) Floor(string, int32, int) (int64, bool) { return math.MaxInt64, true }
func (floorsAt) Parked(string, int32, string, int) bool { return false }
