package consumer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
	"github.com/lanesdev/lanes/hashring"
)

// produceStamped writes seqs [from, to) of each session to topic as lanes'
// producer would with count partitions: on the partition the scheme
// places the session on, stamped with the placement.
func (e *env) produceStamped(topic string, sessions []string, from, to int, pl hashring.Placement) {
	e.t.Helper()
	cl := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	var recs []*kgo.Record
	for seq := from; seq < to; seq++ {
		for _, s := range sessions {
			p, err := pl.Partition([]byte(s), pl.Count)
			if err != nil {
				e.t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(s),
				Value:   []byte(s + "|" + strconv.Itoa(seq)),
				Headers: []kgo.RecordHeader{{Key: hashring.HeaderPlacement, Value: []byte(pl.String())}}})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// grow adds partitions to topic until it has n.
func (e *env) grow(topic string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	adm := kadm.NewClient(e.client())
	if _, err := adm.UpdatePartitions(ctx, n, topic); err != nil {
		e.t.Fatal(err)
	}
}

// moved lists the sessions whose partition differs under the two counts.
func moved(sessions []string, pl hashring.Placement, from, to int) []string {
	var out []string
	for _, s := range sessions {
		a, _ := pl.Partition([]byte(s), from)
		b, _ := pl.Partition([]byte(s), to)
		if a != b {
			out = append(out, s)
		}
	}
	return out
}

// movedSession is the first of 100 sessions that a kafka-placed topic's
// growth from n to m partitions moves: its partition before, q, and
// after, p.
func movedSession(n, m int) (s string, q, p int32) {
	pl := hashring.Placement{Scheme: hashring.SchemeKafka}
	s = moved(sessionNames(100), pl, n, m)[0]
	qq, _ := pl.Partition([]byte(s), n)
	pp, _ := pl.Partition([]byte(s), m)
	return s, int32(qq), int32(pp)
}

// heldByGate is a handler's work: a record of session "blocker" waits
// until gate is closed (or its attempt ends).
func heldByGate(gate <-chan struct{}) func(context.Context, *Message) error {
	return func(ctx context.Context, m *Message) error {
		if string(m.Record.Key) == "blocker" {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// TestGrowthKeepsOrder: a topic of 2 partitions, read by two members,
// grows to 6 while every session's records of the old count are still
// being handled (held at a gate), and each session gets more records
// placed with the new count. A session the growth moves to a partition of
// the other member waits there until its old records are handled (on one
// member its lane already keeps them in order): every session's calls run
// in order, none overlap, none is lost. With Growth.Off the same run
// overtakes (the test's own check that it exercises a move).
func TestGrowthKeepsOrder(t *testing.T) {
	for _, scheme := range []hashring.Scheme{hashring.SchemeKafka, hashring.SchemeJump} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("%v/off=%v", hashring.Placement{Scheme: scheme, Count: 2}, off)
			t.Run(name, func(t *testing.T) { runGrowth(t, scheme, off, false) })
		}
	}
	t.Run("batch", func(t *testing.T) { runGrowth(t, hashring.SchemeKafka, false, true) })
}

func runGrowth(t *testing.T, scheme hashring.Scheme, off, batch bool) {
	const per = 6 // records per session and count
	e := newEnv(t, 2, "chats")
	sessions := sessionNames(40)
	pl := hashring.Placement{Scheme: scheme, Count: 2}
	e.produceStamped("chats", sessions, 0, per, pl)
	gate := make(chan struct{})
	rec := newRecorder(len(sessions)*2*per, func(ctx context.Context, m *Message) error {
		if _, seq := parseValue(m.Record.Value); seq < per {
			select { // the old count's records wait here until the growth is under way
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	var members []*Consumer
	for range 2 {
		cfg := e.config("g", "chats")
		cfg.Growth.Off = off
		cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
		c, err := New(cfg, rec)
		if batch {
			c, err = NewBatch(cfg, BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
				for i, m := range ms {
					if err := rec.Handle(ctx, m); err != nil {
						return &BatchError{Done: i, Err: err}
					}
				}
				return nil
			}))
		}
		if err != nil {
			t.Fatal(err)
		}
		start(t, c)
		members = append(members, c)
	}
	owners := func() map[int32]int {
		o := map[int32]int{}
		for i, c := range members {
			for _, p := range c.Stats().Partitions {
				o[p.Partition] = i
			}
		}
		return o
	}
	waitFor(t, "every session's first record running", func() bool {
		return members[0].Stats().ActiveSessions+members[1].Stats().ActiveSessions == len(sessions) && len(owners()) == 2
	}, nil)
	e.grow("chats", 6)
	e.produceStamped("chats", sessions, per, 2*per, hashring.Placement{Scheme: scheme, Count: 6})
	waitFor(t, "the new partitions assigned", func() bool { return len(owners()) == 6 }, nil)
	o := owners()
	var across []string // moved to a partition of the other member
	for _, s := range moved(sessions, pl, 2, 6) {
		a, _ := pl.Partition([]byte(s), 2)
		b, _ := pl.Partition([]byte(s), 6)
		if o[int32(a)] != o[int32(b)] {
			across = append(across, s)
		}
	}
	if len(across) == 0 {
		t.Fatalf("no session moves to the other member (owners %v): the test proves nothing", o)
	}
	if off {
		waitFor(t, "a moved session's new record to overtake its old ones", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.overlaps) > 0
		}, nil)
		close(gate)
		rec.wait(t)
		return
	}
	waitFor(t, "the sessions moved to the other member waiting", func() bool {
		n := 0
		for _, c := range members {
			for _, g := range c.Stats().Growing {
				n += g.Waiting
			}
		}
		return n == len(across)
	}, func() string { return fmt.Sprintf("%+v %+v", members[0].Stats().Growing, members[1].Stats().Growing) })
	close(gate)
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, sessions, 2*per)
	released := members[0].Stats().MovedReleased + members[1].Stats().MovedReleased
	if released < int64(len(across)) { // sessions that stay on one member wait too, briefly, for the floors of their old partitions
		t.Errorf("MovedReleased = %d, want at least %d", released, len(across))
	}
	for _, c := range members {
		if g := c.Stats().Growing; len(g) != 1 || g[0].Waiting != 0 {
			t.Errorf("after the run: Growing %+v, want the change listed with no session waiting", g)
		}
	}
}

// TestGrowthStartLatestReadsNewPartitions: a StartLatest member of a
// 2-partition topic grown to 8, one message sent to each of 80 sessions
// after the producer saw the new partitions and before the member did:
// every message is handled, as the partitions added since the group's
// commits are read from their start (their records are all newer than
// the group).
func TestGrowthStartLatestReadsNewPartitions(t *testing.T) {
	e := newEnv(t, 2, "chats")
	sessions := sessionNames(80)
	rec := newRecorder(len(sessions), nil)
	cfg := e.config("g", "chats")
	cfg.StartOffset = StartLatest
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(time.Second), kgo.MetadataMaxAge(2*time.Second))
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	adm := kadm.NewClient(e.client())
	eventually(t, "the start positions committed with the topic's count", func() bool {
		os, err := adm.FetchOffsets(context.Background(), "g")
		if err != nil {
			return false
		}
		n := 0
		for _, p := range []int32{0, 1} {
			if o, ok := os.Lookup("chats", p); ok && o.Err == nil && strings.Contains(o.Metadata, growMetaSep+"2") {
				n++
			}
		}
		return n == 2
	})
	e.grow("chats", 8)
	e.produceStamped("chats", sessions, 0, 1, hashring.Placement{Scheme: hashring.SchemeKafka, Count: 8})
	waitFor(t, "every message handled", func() bool {
		select {
		case <-rec.full:
			return true
		default:
			return false
		}
	}, func() string {
		os, _ := adm.FetchOffsets(context.Background(), "g")
		return fmt.Sprintf("%d handled; growing %+v; commits %+v; parts %+v", len(rec.snapshot()), c.Stats().Growing, os, c.Stats().Partitions)
	})
	checkOrder(t, rec, []string{"chats"}, sessions, 1)
}

// TestGrowthHealthReason: a moved session waiting longer than
// Growth.HealthAge makes the member unready with a line naming it, its
// partition and the old partitions it waits for; the line clears when the
// wait ends.
func TestGrowthHealthReason(t *testing.T) {
	c := unstarted(t, func(cfg *Config) { cfg.Growth.HealthAge = time.Minute })
	now := time.Now()
	c.grow.learn("t", []int{2, 8}, now.Add(-time.Hour), 0, now)
	at := regrow.Part{Topic: "t", Partition: 5}
	fresh := c.grow.holds.Enter(regrow.Part{Topic: "t", Partition: 6}, "young", 8, []int32{0}, now)
	if r := growthReasons(c.Stats().Growing, time.Minute); len(r) != 0 {
		t.Fatalf("a wait younger than HealthAge: %q", r)
	}
	old := c.grow.holds.Enter(at, "chat-7", 8, []int32{1, 3}, now.Add(-2*time.Minute))
	found := ""
	for _, r := range c.Health().Reasons {
		if strings.Contains(r, "moved by the topic's growth") {
			found = r
		}
	}
	for _, want := range []string{"t: 2 sessions", `session "chat-7" on partition 5`, "partitions [1 3]", "[2 8]"} {
		if !strings.Contains(found, want) {
			t.Errorf("reason %q lacks %q", found, want)
		}
	}
	c.settleFrom([]settling{{"t", 8}})
	c.grow.holds.Leave(old)
	c.grow.holds.Leave(fresh)
	for _, r := range c.Health().Reasons {
		if strings.Contains(r, "growth") {
			t.Errorf("after the change settled: %q", r)
		}
	}
	if g := c.Stats().Growing; len(g) != 0 {
		t.Errorf("after the change settled: Growing %+v", g)
	}
}
