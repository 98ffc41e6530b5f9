package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Growth scenarios (#34): a consumed topic's partition count grows while
// a backlog placed with the old count is being handled, and lanes'
// producer places each session's next messages with the new count, on a
// partition another member may own. A session the growth moves waits on
// its new partition until the group has handled its records on the old
// one: the ledger finds every session in order, no two calls of a
// session at once, nothing lost.
//
// The producer and the members refresh their metadata every quarter or
// half second (not franz-go's 5 minutes), so the growth is seen while the
// backlog lasts; the producer keeps sending at a steady pace across the
// growth, so a session's first messages after it are still placed with the
// old count, and the rest with the new one.

// Metadata ages of the scenarios' clients.
var (
	growthProducerMeta = []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(250 * time.Millisecond)}
	growthConsumerMeta = []kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(500 * time.Millisecond)}
)

// growthRound is the pace at which the producer sends one message of
// every session across a growth.
const growthRound = 25 * time.Millisecond

// growthWork is the scenarios' handler: 20 to 100 ms a call (simulated
// work, so that a backlog of 50 messages a session lasts a few seconds),
// 2% transient failures, retried.
func growthWork() consumer.Handler {
	f := faulty(faults{transient: 0.02})
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		time.Sleep(20*time.Millisecond + rand.N(80*time.Millisecond)) // simulated work, not synchronisation
		return f.Handle(ctx, m)
	})
}

// growthConfig is consumerConfig with the members' metadata refreshed
// fast enough to see a growth within the backlog.
func (c *cluster) growthConfig(group, topic, dlq string) consumer.Config {
	cfg := c.consumerConfig(group, topic, dlq)
	cfg.ClientOptions = append(slices.Clone(cfg.ClientOptions), growthConsumerMeta...)
	return cfg
}

// grow sets topic's partition count to n (kadm's UpdatePartitions sets
// the total; CreatePartitions would add n).
func (c *cluster) grow(t *testing.T, topic string, n int) {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resps, err := kadm.NewClient(cl).UpdatePartitions(ctx, n, topic)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("grow %s to %d partitions: %v", topic, n, err)
	}
	t.Logf("%s grown to %d partitions", topic, n)
}

// growthProducer is the lanes producer of a growth scenario: one producer
// (one client) for the whole run, as a service has, sending seq next of
// every session in turn; each ledger records the acknowledgements, and it
// notes which partitions each session's messages went to.
type growthProducer struct {
	t        *testing.T
	p        *producer.Producer
	sessions []string
	l        *lanestest.Ledger
	next     int // the next seq of every session

	mu    sync.Mutex
	parts map[string][]int32 // session → the partitions its messages went to, in the order first used
}

func newGrowthProducer(t *testing.T, c *cluster, topic string, part producer.Partitioning, sessions []string, l *lanestest.Ledger) *growthProducer {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: c.brokers, Topic: topic, Partitioning: part,
		DeliveryTimeout: 2 * time.Minute, ClientOptions: append(c.Opts(), growthProducerMeta...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &growthProducer{t: t, p: p, sessions: sessions, l: l, parts: map[string][]int32{}}
}

// send sends n more messages of every session, interleaved, and waits
// for their acknowledgements. It returns the highest partition one went
// to.
func (gp *growthProducer) send(n int) int32 {
	gp.t.Helper()
	var failed atomic.Int64
	var firstErr atomic.Value
	var top atomic.Int32
	for range n {
		seq := gp.next
		gp.next++
		for _, s := range gp.sessions {
			gp.p.SendAsync(context.Background(), s, []byte(s+"|"+strconv.Itoa(seq)), func(res producer.Result, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				gp.l.Acked(s, seq, res.EventID)
				gp.note(s, res.Partition)
				for {
					if was := top.Load(); res.Partition <= was || top.CompareAndSwap(was, res.Partition) {
						break
					}
				}
			}, producer.WithSequence(uint64(seq)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := gp.p.Flush(ctx); err != nil {
		gp.t.Fatalf("flush: %v", err)
	}
	if n := failed.Load(); n > 0 {
		gp.t.Fatalf("%d sends failed, first: %v", n, firstErr.Load())
	}
	return top.Load()
}

func (gp *growthProducer) note(s string, p int32) {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	if !slices.Contains(gp.parts[s], p) {
		gp.parts[s] = append(gp.parts[s], p)
	}
}

// crossing is what a producer did across a growth.
type crossing struct {
	rounds   int // messages sent of every session
	switched int // the round in which a message first went to a new partition
	handled  int // messages accounted for by then
}

// sendAcross sends, after the topic grew from old partitions, one message
// of every session each growthRound, until it sent n and the producer has
// placed a whole round with the new count (a message went to a partition
// the old count did not have in an earlier round). It fails after two
// minutes without the new count. Each round is acknowledged before the
// next is sent: a message still in flight to its old partition when its
// session's next one is read may be missed by the wait (a documented
// limit of SendAsync, docs/operations.md), as a service using Send never
// has.
func (gp *growthProducer) sendAcross(old, n int) crossing {
	gp.t.Helper()
	cr := crossing{switched: -1}
	tick := time.NewTicker(growthRound) // the producer's pace, not synchronisation
	defer tick.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for ; cr.rounds < n || cr.switched < 0 || cr.switched == cr.rounds-1; cr.rounds++ {
		if cr.rounds >= n && time.Now().After(deadline) {
			gp.t.Fatalf("the producer placed no message with the grown count in %d rounds: it never saw the growth", cr.rounds)
		}
		if top := gp.send(1); top >= int32(old) && cr.switched < 0 {
			cr.switched, cr.handled = cr.rounds, gp.l.Accounted()
		}
		<-tick.C
	}
	return cr
}

// moved returns the sessions whose messages went to more than one
// partition, and of those the ones that went to three or more (moved by
// two growths).
func (gp *growthProducer) moved() (moved, twice int) {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	for _, ps := range gp.parts {
		if len(ps) > 1 {
			moved++
		}
		if len(ps) > 2 {
			twice++
		}
	}
	return moved, twice
}

// growthWatch runs a scenario's members and samples their Stats: the most
// moved sessions waiting at once, and (at the end) the waits released.
type growthWatch struct {
	t       *testing.T
	mu      sync.Mutex
	members []*member
	maxWait int
	stop    chan struct{}
	done    chan struct{}
}

func newGrowthWatch(t *testing.T) *growthWatch {
	w := &growthWatch{t: t, stop: make(chan struct{}), done: make(chan struct{})}
	go w.sample()
	t.Cleanup(w.end)
	return w
}

// start runs one more member, handling with growthWork, recorded in l.
func (w *growthWatch) start(name string, cfg consumer.Config, l *lanestest.Ledger) *member {
	w.t.Helper()
	m := startMember(w.t, name, cfg, l.Handler(name, growthWork()))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = append(w.members, m)
	return m
}

func (w *growthWatch) sample() {
	defer close(w.done)
	tick := time.NewTicker(10 * time.Millisecond) // sampling Stats: the waits have no other signal
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		n := 0
		for _, m := range w.members {
			for _, g := range m.c.Stats().Growing {
				n += g.Waiting
			}
		}
		w.maxWait = max(w.maxWait, n)
		w.mu.Unlock()
	}
}

func (w *growthWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// owners waits until n members own partitions (of a topic of at least n).
func (w *growthWatch) owners(n int, limit time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		w.mu.Lock()
		owning := 0
		for _, m := range w.members {
			if len(m.c.Stats().Partitions) > 0 {
				owning++
			}
		}
		w.mu.Unlock()
		if owning >= n {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%d members own partitions after %v; want %d", owning, limit, n)
		}
		time.Sleep(20 * time.Millisecond) // polling Stats: no signal for an assignment
	}
}

// finished waits until l accounts for every message acknowledged; on a
// timeout it logs what each member holds (its growth figures, its
// partitions and the record holding each), the group's commits of topic
// (their growth sections carry the floors) and the ledger's report before
// failing.
func (w *growthWatch) finished(c *cluster, group, topic string, l *lanestest.Ledger, limit time.Duration) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := l.WaitAccounted(ctx, l.AckedCount())
	if err == nil {
		return
	}
	held := map[int32]int64{}
	w.mu.Lock()
	for _, m := range w.members {
		s := m.c.Stats()
		w.t.Logf("member %s: growing %+v; moved released %d; hot sessions %+v", m.name, s.Growing, s.MovedReleased, s.HotSessions)
		for _, p := range s.Partitions {
			w.t.Logf("member %s: partition %d: watermark %d, committed %d, high watermark %d, buffered %d, in flight %d, pending %d, held at %d by %q for %v",
				m.name, p.Partition, p.Watermark, p.Committed, p.HighWatermark, p.Buffered, p.InFlight, p.Pending, p.HeldAt, p.HeldBySession, p.WatermarkAge)
			if p.HeldAt >= 0 {
				held[p.Partition] = p.HeldAt
			}
		}
	}
	w.mu.Unlock()
	logHeld(w.t, c, topic, held)
	logCommits(w.t, c, group, topic)
	r := l.Report()
	w.t.Logf("%s", r)
	for _, d := range r.Details {
		w.t.Log(d)
	}
	w.t.Fatal(err)
}

// logHeld logs the records at the given offsets of topic's partitions:
// key, value and placement stamp.
func logHeld(t *testing.T, c *cluster, topic string, at map[int32]int64) {
	t.Helper()
	if len(at) == 0 {
		return
	}
	offs := map[int32]kgo.Offset{}
	for p, o := range at {
		offs[p] = kgo.NewOffset().At(o)
	}
	cl := c.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(at) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if o, ok := at[r.Partition]; ok && r.Offset == o {
				t.Logf("partition %d offset %d (the record holding it): key %s, value %s, %s %s",
					r.Partition, r.Offset, r.Key, r.Value, hashring.HeaderPlacement, header(r, hashring.HeaderPlacement))
				delete(at, r.Partition)
			}
		})
	}
}

// logCommits logs the group's commits of topic with their metadata.
func logCommits(t *testing.T, c *cluster, group, topic string) {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Logf("group %s commits: %v", group, err)
		return
	}
	parts := resps[topic]
	ids := make([]int32, 0, len(parts))
	for p := range parts {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	for _, p := range ids {
		r := parts[p]
		t.Logf("group %s commit of partition %d: offset %d, metadata %q", group, p, r.At, r.Metadata)
	}
}

// results ends the sampling and returns the waits released by every
// member that ran, and the most sessions waiting at once.
func (w *growthWatch) results() (released int64, maxWait int) {
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.members {
		released += m.c.Stats().MovedReleased
	}
	return released, w.maxWait
}

// checkGrowth fails a run that tested nothing: no session moved, the
// producer placed with the new count only after the backlog was handled,
// or no moved session waited. backlog is the messages sent before the
// growth; maxWait < 0: not sampled.
func checkGrowth(t *testing.T, gp *growthProducer, cr crossing, backlog int, released int64, maxWait int) {
	t.Helper()
	moved, twice := gp.moved()
	waited := ""
	if maxWait >= 0 {
		waited = fmt.Sprintf(", at most %d sessions waiting at once", maxWait)
	}
	t.Logf("%d of %d sessions moved (%d by two growths); the producer's first message on a new partition was in round %d of %d, with %d of the %d earlier messages handled; %d moved waits released%s",
		moved, len(gp.sessions), twice, cr.switched, cr.rounds, cr.handled, backlog, released, waited)
	switch {
	case moved == 0:
		t.Fatal("no session's messages went to two partitions: the growth moved nothing, the run proves nothing")
	case cr.handled >= backlog:
		t.Fatalf("the producer placed with the new count only after the %d earlier messages were handled: the run proves nothing", backlog)
	case released == 0:
		t.Fatal("no moved session waited for its old partition (MovedReleased 0 on every member): the consumers did not see the growth")
	}
}

// startGrowth starts the two-member growth run: a topic of 2 partitions,
// 60 sessions, two members in group name each owning an old partition,
// and backlog messages a session sent with part, a tenth of them handled.
func startGrowth(t *testing.T, name string, part producer.Partitioning, backlog int) (
	c *cluster, topic, dlq string, l *lanestest.Ledger, sessions []string, cfg consumer.Config,
	w *growthWatch, gp *growthProducer, start time.Time) {
	t.Helper()
	c = newCluster(t)
	topic, dlq = c.topics(t, 2)
	l = lanestest.NewLedger()
	sessions = sessionNames(60)
	start = time.Now()
	cfg = c.growthConfig(name, topic, dlq)
	w = newGrowthWatch(t)
	w.start("m1", cfg, l)
	w.start("m2", cfg, l)
	w.owners(2, time.Minute) // each member owns an old partition before the backlog
	gp = newGrowthProducer(t, c, topic, part, sessions, l)
	gp.send(backlog)
	waitFinished(t, l, len(sessions)*backlog/10, 2*time.Minute)
	return c, topic, dlq, l, sessions, cfg, w, gp, start
}

// TestGrowthScenario, the scenario of #34: 60 sessions with a backlog on
// a topic of 2 partitions, two members; while the backlog is handled the
// topic grows to 8 and the lanes producer sends 30 more messages a
// session, most placed with the new count. With jump hashing and with
// Kafka's partitioner: every session in order, no overlap, nothing lost.
func TestGrowthScenario(t *testing.T) {
	for _, tc := range []struct {
		name string
		part producer.Partitioning
	}{{"jump", producer.PartitionJump}, {"kafka", producer.PartitionKafka}} {
		t.Run(tc.name, func(t *testing.T) {
			const backlog, after = 50, 30
			c, topic, dlq, l, sessions, cfg, w, gp, start := startGrowth(t, "growth-"+tc.name, tc.part, backlog)
			c.grow(t, topic, 8)
			cr := gp.sendAcross(2, after)
			w.finished(c, cfg.Group, topic, l, 3*time.Minute)
			released, maxWait := w.results()
			checkGrowth(t, gp, cr, len(sessions)*backlog, released, maxWait)
			c.readDLQ(t, dlq, l)
			assertClean(t, c, l.Report(), time.Since(start), false)
		})
	}
}

// TestGrowthTwice: the topic grows from 2 to 4 partitions, and from 4 to
// 8 while the first change is still on (the records of the count 2 and 4
// not all handled): a session moved by both waits for both its old
// partitions. Jump hashing, two members.
func TestGrowthTwice(t *testing.T) {
	const backlog, after = 40, 30
	c, topic, dlq, l, sessions, cfg, w, gp, start := startGrowth(t, "growth-twice", producer.PartitionJump, backlog)
	c.grow(t, topic, 4)
	first := gp.sendAcross(2, after)
	sentBefore := len(sessions) * gp.next
	c.grow(t, topic, 8)
	second := gp.sendAcross(4, after)
	w.finished(c, cfg.Group, topic, l, 3*time.Minute)
	released, maxWait := w.results()
	checkGrowth(t, gp, first, len(sessions)*backlog, released, maxWait)
	t.Logf("second growth: the producer's first message on a new partition was in round %d of %d, with %d of the %d earlier messages handled",
		second.switched, second.rounds, second.handled, sentBefore)
	if second.handled >= sentBefore {
		t.Fatalf("the second growth came after every earlier message was handled: it did not meet the first change's records")
	}
	if _, twice := gp.moved(); twice == 0 {
		t.Fatal("no session moved by both growths: the chain of old partitions was not exercised")
	}
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// TestGrowthRollingDeploy: three members on a topic of 3 partitions are
// replaced one by one (as in TestRollingDeploy: each replacement joins
// while its predecessor drains) while the topic grows to 9 and the
// producer places sessions on the new partitions: the waits of moved
// sessions and the old partitions' floors change hands with the
// partitions. Kafka's partitioner.
func TestGrowthRollingDeploy(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 3)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	const backlog, after = 60, 30
	start := time.Now()
	cfg := c.growthConfig("growth-rolling", topic, dlq)
	cfg.ShutdownTimeout = 20 * time.Second
	w := newGrowthWatch(t)
	var members []*member
	for i := 1; i <= 3; i++ {
		members = append(members, w.start(fmt.Sprintf("old%d", i), cfg, l))
	}
	w.owners(3, time.Minute) // each member owns an old partition before the backlog
	gp := newGrowthProducer(t, c, topic, producer.PartitionKafka, sessions, l)
	gp.send(backlog)
	waitFinished(t, l, len(sessions)*backlog/10, 2*time.Minute)
	bound := cfg.ShutdownTimeout + consumer.DefaultCommitTimeout + consumer.DefaultLeaveTimeout + 5*time.Second
	var cr crossing
	for i, old := range members {
		began := time.Now()
		stopped := make(chan error, 1)
		go func() { stopped <- old.stop() }() // the old member drains ...
		name := fmt.Sprintf("new%d", i+1)
		w.start(name, cfg, l) // ... while its replacement joins
		if i == 0 {           // ... and the topic grows meanwhile
			c.grow(t, topic, 9)
			cr = gp.sendAcross(3, after)
		}
		if err := <-stopped; err != nil {
			t.Errorf("%s: Run: %v", old.name, err)
		}
		if took := time.Since(began); took > bound {
			t.Errorf("%s: Run returned %v after cancel, bound %v", old.name, took, bound)
		}
		t.Logf("%s replaced by %s; its shutdown took %v; %d of %d accounted",
			old.name, name, time.Since(began).Round(time.Millisecond), l.Accounted(), l.AckedCount())
	}
	w.finished(c, cfg.Group, topic, l, 3*time.Minute)
	released, maxWait := w.results()
	checkGrowth(t, gp, cr, len(sessions)*backlog, released, maxWait)
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// A growth scenario's consumer process: the test binary run again with
// LANES_GROWTH_CHILD set, by the children machinery of crash_test.go
// (which sets LANES_HELPER for TestMain's own helper: this one is
// dispatched here, before TestMain runs). It handles with growthWork and
// refreshes its metadata fast (growthConsumerMeta), writes its calls as
// helperConsumer does, and every 20 ms its growth figures (childGrowth) to
// stats-<member>.json beside its calls, for the test to pick a member to
// kill while moved sessions wait on it.
func init() {
	if os.Getenv("LANES_GROWTH_CHILD") != "" {
		os.Exit(growthChild())
	}
}

// childGrowth is what a growth scenario's consumer process reports.
type childGrowth struct {
	Waiting    int     `json:"waiting"`    // moved sessions waiting now
	Released   int64   `json:"released"`   // MovedReleased
	Partitions []int32 `json:"partitions"` // owned now
	// For a failure's log: the member's Growing and partitions.
	Growing []consumer.GrowthStats    `json:"growing"`
	Parts   []consumer.PartitionStats `json:"parts"`
	Hot     []consumer.SessionStats   `json:"hot"`
}

func growthChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if ready := os.NewFile(childReadyFD, "ready"); ready != nil { // SIGTERM is handled from here on
		_, _ = ready.Write([]byte{1})
		ready.Close()
	}
	callsName := os.Getenv("LANES_CALLS_FILE")
	f, err := os.OpenFile(callsName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	fl := &callFile{f: f}
	member := os.Getenv("LANES_MEMBER")
	opts := append([]kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.RebalanceTimeout(8 * time.Second)}, protocolOpts()...)
	cfg := consumer.Config{
		Brokers: strings.Split(os.Getenv("LANES_CHILD_BROKERS"), ","), Group: os.Getenv("LANES_GROUP"),
		Topics: []string{os.Getenv("LANES_TOPIC")}, DeadLetterTopic: os.Getenv("LANES_DLQ"),
		CommitInterval: 100 * time.Millisecond,
		Retry:          consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 40},
		ClientOptions:  append(opts, growthConsumerMeta...),
	}
	level := slog.LevelInfo
	if os.Getenv("LANES_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	cfg.Slog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("member", member)
	c, err := consumer.New(cfg, lanestest.Record(member, fl.write, growthWork()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	statsName := filepath.Join(filepath.Dir(callsName), "stats-"+member+".json")
	reporting, endReport := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			writeChildGrowth(statsName, c.Stats())
			select {
			case <-reporting.Done():
				return
			case <-tick.C:
			}
		}
	}()
	err = c.Run(ctx)
	endReport()
	<-reported
	writeChildGrowth(statsName, c.Stats())
	if err != nil {
		fmt.Fprintln(os.Stderr, "growth helper:", err)
	}
	if err != nil && !(errors.Is(err, consumer.ErrCommit) && !errors.Is(err, consumer.ErrUnfinished)) {
		return 1
	}
	return 0
}

// writeChildGrowth replaces the file name with s's growth figures (a
// rename: a reader never sees half a file).
func writeChildGrowth(name string, s consumer.Stats) {
	g := childGrowth{Released: s.MovedReleased, Partitions: []int32{}, Growing: s.Growing, Parts: s.Partitions, Hot: s.HotSessions}
	for _, gs := range s.Growing {
		g.Waiting += gs.Waiting
	}
	for _, p := range s.Partitions {
		g.Partitions = append(g.Partitions, p.Partition)
	}
	b, _ := json.Marshal(g)
	if os.WriteFile(name+".tmp", b, 0o644) == nil {
		_ = os.Rename(name+".tmp", name)
	}
}

// childGrowthOf reads the last growth figures member reported (false:
// none yet).
func childGrowthOf(ch *children, member string) (childGrowth, bool) {
	var g childGrowth
	b, err := os.ReadFile(filepath.Join(ch.dir, "stats-"+member+".json"))
	return g, err == nil && json.Unmarshal(b, &g) == nil
}

// childReports returns the running children's last growth figures.
func childReports(ch *children) map[string]childGrowth {
	all := map[string]childGrowth{}
	for _, name := range ch.names() {
		if g, found := childGrowthOf(ch, name); found {
			all[name] = g
		}
	}
	return all
}

// waitChildren polls the running children's growth figures until ok
// holds for them, failing after limit.
func waitChildren(t *testing.T, ch *children, what string, limit time.Duration, ok func(map[string]childGrowth) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		all := childReports(ch)
		if ok(all) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (children report %+v)", what, limit, all)
		}
		time.Sleep(20 * time.Millisecond) // the children report through files: poll them
	}
}

// waitChildrenLoaded is waitLoaded that, on a timeout, logs what each
// running child reported last (its growth figures, its partitions and the
// record holding each), the group's commits of topic and the ledger's
// report before failing.
func waitChildrenLoaded(t *testing.T, c *cluster, ch *children, topic string, l *lanestest.Ledger, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for ch.calls.load(t, l) < n {
		if time.Now().Before(deadline) {
			ch.ghosts(c, groupName("growth-crash")) // a child killed while its JoinGroup waited: kfake keeps it
			time.Sleep(200 * time.Millisecond)      // the children report through files: poll them
			continue
		}
		held := map[int32]int64{}
		for name, g := range childReports(ch) {
			t.Logf("child %s: growing %+v; moved released %d; hot sessions %+v", name, g.Growing, g.Released, g.Hot)
			for _, p := range g.Parts {
				t.Logf("child %s: partition %d: watermark %d, committed %d, high watermark %d, buffered %d, in flight %d, pending %d, held at %d by %q for %v",
					name, p.Partition, p.Watermark, p.Committed, p.HighWatermark, p.Buffered, p.InFlight, p.Pending, p.HeldAt, p.HeldBySession, p.WatermarkAge)
				if p.HeldAt >= 0 {
					held[p.Partition] = p.HeldAt
				}
			}
		}
		logHeld(t, c, topic, held)
		logCommits(t, c, groupName("growth-crash"), topic)
		r := l.Report()
		t.Logf("%s", r)
		for _, d := range r.Details {
			t.Log(d)
		}
		t.Fatalf("timed out: %d of %d finished", l.Accounted(), n)
	}
}

// TestGrowthMemberKilled: two consumer processes handle a backlog on a
// topic of 2 partitions that grows to 8; a member on which moved sessions
// wait is killed with SIGKILL (no drain, no commit, no leave) and
// replaced, and once more after the group recovered (its replacement
// owns partitions) if sessions still wait then. Each killed member owned an old partition whose floors the
// waits depend on: its next owner redoes what it did not commit, and the
// waits end only once that is handled. Nothing lost, no session out of
// order (redeliveries after the kill allowed). Kafka's partitioner.
func TestGrowthMemberKilled(t *testing.T) {
	longOnly(t, "the growth crash scenario")
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	const backlog, after = 50, 30
	start := time.Now()
	ch := newChildren(t, c.brokers, groupName("growth-crash"), topic, dlq)
	ch.env = append(ch.env, "LANES_GROWTH_CHILD=1")
	ch.spawn()
	ch.spawn()
	waitChildren(t, ch, "both members own a partition", time.Minute, func(all map[string]childGrowth) bool {
		owning := 0
		for _, g := range all {
			if len(g.Partitions) > 0 {
				owning++
			}
		}
		return owning == 2
	})
	gp := newGrowthProducer(t, c, topic, producer.PartitionKafka, sessions, l)
	gp.send(backlog)
	waitLoaded(t, ch.calls, l, len(sessions)*backlog/10, 2*time.Minute)
	c.grow(t, topic, 8)
	cr := gp.sendAcross(2, after)
	total := l.AckedCount()
	kills := 0
	for ; kills < 2; kills++ {
		if kills > 0 { // the group recovered from the last kill: its replacement owns partitions
			waitChildren(t, ch, "the replacement owns partitions", 2*time.Minute, func(all map[string]childGrowth) bool {
				return len(all[fmt.Sprintf("p%d", ch.n)].Partitions) > 0
			})
		}
		var victim string
		var at childGrowth
		limit := time.Minute
		if kills > 0 {
			limit = 20 * time.Second // a second kill only while sessions still wait
		}
		deadline := time.Now().Add(limit)
		for victim == "" && time.Now().Before(deadline) && ch.calls.load(t, l) < total {
			for name, g := range childReports(ch) {
				if g.Waiting > at.Waiting {
					victim, at = name, g
				}
			}
			if victim == "" {
				time.Sleep(20 * time.Millisecond) // the children report through files: poll them
			}
		}
		if victim == "" {
			if kills == 0 {
				t.Fatalf("no member reported a moved session waiting within %v of the growth (%d of %d handled): nothing to kill it during", limit, l.Accounted(), total)
			}
			break
		}
		ch.kill(victim) // SIGKILL: no drain, no commit, no leave
		t.Logf("SIGKILLed %s (partitions %v) with %d moved sessions waiting on it; %d of %d handled",
			victim, at.Partitions, at.Waiting, ch.calls.load(t, l), total)
		ch.spawn()
	}
	waitChildrenLoaded(t, c, ch, topic, l, total, 5*time.Minute)
	for _, name := range ch.names() {
		if err := ch.term(name); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	ch.calls.load(t, l)
	var released int64
	for i := 1; i <= ch.n; i++ {
		g, _ := childGrowthOf(ch, fmt.Sprintf("p%d", i))
		released += g.Released
	}
	checkGrowth(t, gp, cr, len(sessions)*backlog, released, -1)
	c.readDLQ(t, dlq, l)
	t.Logf("%d SIGKILLs, %d consumer processes", kills, ch.n)
	assertClean(t, c, l.Report(), time.Since(start), true)
}

// TestGrowthBacklogBeyondBuffer: one member, a topic of 2 partitions with
// a backlog larger than a partition hands its lanes at once
// (MaxBufferedRecords 32: the rest waits, stashed or unfetched), grows to
// 8; the producer places the sessions' next messages with the new count.
// A moved session's first record on its new partition reaches its lane
// while its older records on the old partition are still to come: they
// must not end up waiting behind it. Every message handled, in order.
// Kafka's partitioner.
func TestGrowthBacklogBeyondBuffer(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 2)
	l := lanestest.NewLedger()
	sessions := sessionNames(20)
	const backlog, after = 60, 10
	start := time.Now()
	cfg := c.growthConfig("growth-buffer", topic, dlq)
	cfg.MaxBufferedRecords = 32
	w := newGrowthWatch(t)
	w.start("m1", cfg, l)
	w.owners(1, time.Minute)
	gp := newGrowthProducer(t, c, topic, producer.PartitionKafka, sessions, l)
	gp.send(backlog)
	waitFinished(t, l, len(sessions)*backlog/10, 2*time.Minute)
	c.grow(t, topic, 8)
	cr := gp.sendAcross(2, after)
	w.finished(c, cfg.Group, topic, l, time.Minute)
	released, maxWait := w.results()
	checkGrowth(t, gp, cr, len(sessions)*backlog, released, maxWait)
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}
