package consumer

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStashMemoryBound: one session blocked on a one-partition topic with a
// backlog. What the partition holds (Pending: in lanes, or done above the
// blocked record) plus what it stashed stays within the bound the docs
// give: 1.5 × MaxBufferedRecords + 2 × MaxPollRecords (config.go,
// https://github.com/lanesdev/lanes/blob/main/docs/consumer.md,
// https://github.com/lanesdev/lanes/blob/main/docs/guarantees.md#5-bounded-memory):
// a poll admitted just below the bound, another stashed just below half of
// it. The shapes here (polls of 20 against a bound of 21) reach 40 held +
// 20 stashed.
func TestStashMemoryBound(t *testing.T) {
	const bound, poll = 21, 20
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"slow"}, 300)
	gate := make(chan struct{})
	rec := newRecorder(300, func(ctx context.Context, m *Message) error {
		<-gate
		return nil
	})
	cfg := e.config("g-stash-bound", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = bound, poll
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	var ps PartitionStats
	eventually(t, "fetching paused with half the bound stashed", func() bool {
		for _, p := range c.Stats().Partitions {
			ps = p
		}
		return ps.Stashed >= bound/2
	})
	held := ps.Pending + ps.Stashed
	t.Logf("pending %d + stashed %d = %d in memory; documented bound %d", ps.Pending, ps.Stashed, held, bound*3/2+2*poll)
	if held > bound*3/2+2*poll {
		t.Errorf("partition holds %d records (pending %d, stashed %d): over the documented 1.5 × %d + 2 × %d",
			held, ps.Pending, ps.Stashed, bound, poll)
	}
	close(gate)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, []string{"slow"}, 300)
}

// TestFilterNotConcurrent: Filter and SessionKey were called on the poll
// loop only, one record at a time; a user's Filter keeping plain state
// (a sampling counter, a map) was safe. With the stash drained on the flow
// controller's goroutine, they run there too, concurrently with the poll
// loop's calls for other partitions: -race reports the user's state.
func TestFilterNotConcurrent(t *testing.T) {
	const parts, per = 4, 40
	e := newEnv(t, parts, "chats", "dlq")
	sessions := sessionNames(40)
	e.produce("chats", sessions, per)
	rec := newRecorder(len(sessions)*per, nil)
	seen := map[string]int{} // plain state, as a user's Filter may keep
	cfg := e.config("g-filter-conc", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = 4, 8
	cfg.Filter = func(r *kgo.Record) bool {
		seen[string(r.Key)]++
		return true
	}
	keyed := map[string]int{}
	cfg.SessionKey = func(r *kgo.Record) string {
		keyed[string(r.Key)]++
		return string(r.Key)
	}
	runAll(t, cfg, rec, 0)
	checkOrder(t, rec, []string{"chats"}, sessions, per)
	if c := c0(seen); c < len(sessions)*per {
		t.Fatalf("Filter saw %d records, want at least %d", c, len(sessions)*per)
	}
}

func c0(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestPauseAppliedBeforeNextPoll: a dispatch that stashes half the bound
// flips the partition's fetch to paused; the pause must reach the client
// before the poll loop polls again, or every further poll is stashed too
// (the stash's bound assumes it; on main, apply held applyMu from taking the
// dirty set to applying it, so the poll loop's apply waited for it). Here
// the flow goroutine, poked by the flip, takes the dirty set while the
// dispatch goes on (Filter of the next partition is where it happens) and
// drains another freed partition's stash first: the poll loop's apply then
// finds nothing dirty and returns with the pause not applied.
func TestPauseAppliedBeforeNextPoll(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f := newFlow()
	f.client, f.topics = cl, []string{"t"}
	q := newPartition(context.Background(), partKey{"t", 1}, 1, 4, f.mark) // a freed partition with a stash
	entered, release, flowDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f.drain = func(x *partition) {
		if x == q { // its stash being handed to lanes
			close(entered)
			<-release
		}
	}
	c := &Consumer{flow: f, own: newOwners()}
	c.cfg.MaxPollRecords = 8
	c.cfg.Filter = func(r *kgo.Record) bool {
		if r.Partition == 2 { // after t/0 was stashed: the flow goroutine wakes
			go func() { defer close(flowDone); f.apply() }()
			<-entered
		}
		return false // filtered: done at once, no lane needed
	}
	c.own.assign(map[string][]int32{"t": {0, 2}}, 4, f.mark)
	p := c.own.get(partKey{"t", 0})
	p.admit(recsAt(1, 2, 3, 4), 9, nil, func(int, uint64) {}) // full
	f.mark(q)
	rec := func(part int32, offs ...int64) []*kgo.Record {
		out := recsAt(offs...)
		for _, r := range out {
			r.Partition = part
		}
		return out
	}
	c.dispatch(kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{
		{Partition: 0, HighWatermark: 9, Records: rec(0, 5, 6)},
		{Partition: 2, HighWatermark: 9, Records: rec(2, 1)},
	}}}}})
	paused := cl.PauseFetchPartitions(nil)["t"] // the poll loop would poll again now
	close(release)
	<-flowDone
	if !p.paused || len(p.stash) != 2 {
		t.Fatalf("setup: t/0 stashed %d, wants its fetch paused %v", len(p.stash), p.paused)
	}
	if !slices.Contains(paused, 0) {
		t.Fatalf("dispatch returned with t/0's pause not applied (paused: %v): the next poll is stashed too, past half the bound", paused)
	}
}
