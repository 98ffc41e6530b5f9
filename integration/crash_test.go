package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// TestMain runs the test binary as a consumer process when LANES_HELPER is
// set (the crash scenario re-executes itself), and as the test suite
// otherwise.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_TEST_LOG") == "" {
		// Consumers given no logger log to slog.Default(): keep the
		// suite and its helper processes quiet unless asked.
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	if os.Getenv("LANES_HELPER") == "consumer" {
		os.Exit(helperConsumer())
	}
	goleak.VerifyTestMain(m)
}

// helperConsumer is one consumer process: it handles the scenario's topic
// and appends every handler call, as a JSON line, to LANES_CALLS_FILE
// before returning, so a SIGKILL loses nothing that was reported done.
func helperConsumer() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if ready := os.NewFile(childReadyFD, "ready"); ready != nil { // SIGTERM is handled from here on
		_, _ = ready.Write([]byte{1})
		ready.Close()
	}
	f, err := os.OpenFile(os.Getenv("LANES_CALLS_FILE"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	fl := &callFile{f: f}
	member := os.Getenv("LANES_MEMBER")
	cfg := consumer.Config{
		Brokers: strings.Split(os.Getenv("LANES_CHILD_BROKERS"), ","), Group: os.Getenv("LANES_GROUP"),
		Topics: []string{os.Getenv("LANES_TOPIC")}, DeadLetterTopic: os.Getenv("LANES_DLQ"),
		CommitInterval: 100 * time.Millisecond,
		Retry:          consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 40},
		// A killed member is noticed after the session timeout; a rebalance
		// waits for members that never come back at most RebalanceTimeout.
		// Under KIP-848 the broker sets the first two (kafka.sh: the same
		// 6 s and 500 ms).
		// The client ID names the process in the group's member list
		// (children.ghosts).
		ClientOptions: append([]kgo.Opt{kgo.SessionTimeout(childSessionTimeout), kgo.HeartbeatInterval(childHeartbeat),
			kgo.RebalanceTimeout(childRebalanceTimeout), kgo.ClientID(childClientID(member))}, protocolOpts()...),
	}
	// A child's stderr goes to its own log file, whose tail a failing
	// scenario prints: log at INFO always, DEBUG when asked.
	level := slog.LevelInfo
	if os.Getenv("LANES_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	cfg.Slog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("member", member)
	h := faulty(faults{transient: 0.05, work: 10 * time.Millisecond})
	if os.Getenv("LANES_PARK") != "" { // TestParkCrash
		cfg.Park, h = parkHelper(h)
	}
	if out := os.Getenv("LANES_TX_OUT"); out != "" { // TestCrashExactlyOnce: the slot's transactional ID, kept across restarts
		cfg.CommitInterval = 100 * time.Millisecond
		cfg.Transactions = consumer.TransactionPolicy{Enabled: true, ID: os.Getenv("LANES_TX_ID"), Timeout: 10 * time.Second}
		h = txHandler(out, faults{transient: 0.05, work: 10 * time.Millisecond})
	}
	c, err := consumer.New(cfg, lanestest.Record(member, fl.write, h))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = c.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
	}
	if err != nil && !(errors.Is(err, consumer.ErrCommit) && !errors.Is(err, consumer.ErrUnfinished)) {
		return 1
	}
	return 0 // a final commit refused after a rebalance: the next owner redoes that work
}

// callFile appends the calls it is given to a file, one JSON line per
// call, synchronously: a call is on disk before its handler returns, so a
// record lanes considers done is never missing from the file.
type callFile struct {
	mu sync.Mutex
	f  *os.File
}

func (cf *callFile) write(c lanestest.Call) {
	b, _ := json.Marshal(c)
	cf.mu.Lock()
	defer cf.mu.Unlock()
	_, _ = cf.f.Write(append(b, '\n'))
}

// Scenario 3, crash: consumers run as child processes and are killed with
// SIGKILL at random points, then restarted, several times; nothing is lost
// and no session runs out of order.
func TestCrashScenario(t *testing.T) {
	longOnly(t, "the crash scenario")
	c := newCluster(t)
	topic, dlq := c.topics(t, 6)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	const per = 400
	start := time.Now()
	c.produce(t, topic, sessions, per, l)
	ch := newChildren(t, c.brokers, groupName("crash"), topic, dlq)
	calls := ch.calls
	procs := []string{ch.spawn(), ch.spawn()}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	kills := 0
	total := len(sessions) * per
	for kills < 4 && calls.load(t, l) < total {
		// Let the group recover from the last kill (progress resumes), then
		// kill at a random point 0.2 to 1 s later. Killing faster than a
		// rebalance completes only piles up rebalances.
		waitProgress(t, calls, l, 200, total, func() { ch.ghosts(c, groupName("crash")) })
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		k := rng.IntN(len(procs))
		ch.kill(procs[k]) // SIGKILL: no drain, no commit, no leave
		kills++
		procs[k] = ch.spawn()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for calls.load(t, l) < len(sessions)*per {
		ch.ghosts(c, groupName("crash"))
		if time.Now().After(deadline) {
			logGroup(t, c, groupName("crash"), topic)
			t.Fatalf("timed out: %d of %d finished", l.Accounted(), len(sessions)*per)
		}
		time.Sleep(200 * time.Millisecond) // the children report through files: poll them
	}
	for _, p := range procs {
		if err := ch.term(p); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	calls.load(t, l)
	c.readDLQ(t, dlq, l)
	r := l.Report()
	t.Logf("%d SIGKILLs, %d consumer processes, %d members of killed processes removed from the group (kfake kept them)", kills, ch.n, ch.reaped)
	assertClean(t, c, r, time.Since(start), true)
}

// logGroup logs the group's members, with their client IDs (which name
// the processes) and assignments, and each partition's committed and end
// offsets: who holds what a stuck scenario waits for.
func logGroup(t *testing.T, c *cluster, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Logf("describe group %s: %v", group, err)
	}
	for _, g := range dg {
		t.Logf("group %s: state %s, error %v", g.Group, g.State, g.Err)
		for _, m := range g.Members {
			var held []int32
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range a.Topics {
					held = append(held, tp.Partitions...)
				}
			}
			t.Logf("member %s (client %s): partitions %v", m.MemberID, m.ClientID, held)
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Logf("committed offsets of %s: %v", group, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Logf("end offsets of %s: %v", topic, err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, _ := committed.Lookup(topic, e.Partition)
		t.Logf("partition %d: committed %d, end %d", e.Partition, o.At, e.Offset)
	})
}

// waitProgress waits until n more messages finished (or all did), failing
// after a minute without that progress; each is called at every poll.
func waitProgress(t *testing.T, calls *callFiles, l *lanestest.Ledger, n, total int, each ...func()) {
	t.Helper()
	from := calls.load(t, l)
	deadline := time.Now().Add(time.Minute)
	for got := from; got < from+n && got < total; got = calls.load(t, l) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress after a restart: %d finished, %d a minute ago", got, from)
		}
		for _, f := range each {
			f()
		}
		time.Sleep(100 * time.Millisecond) // the children report through files: poll them
	}
}

// callFiles reads the children's call files as they grow.
type callFiles struct {
	dir  string
	read map[string]int64 // file → bytes consumed (whole lines)
}

// load feeds l the calls written to dir's files since the last load and
// returns the number of messages accounted for.
func (cf *callFiles) load(t *testing.T, l *lanestest.Ledger) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cf.dir, "calls-*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b = b[cf.read[name]:]
		for {
			line, rest, ok := bytes.Cut(b, []byte{'\n'})
			if !ok {
				break // a line still being written, or torn by a SIGKILL: never whole
			}
			cf.read[name] += int64(len(line) + 1)
			b = rest
			var c lanestest.Call
			if json.Unmarshal(line, &c) == nil {
				l.RecordCall(c)
			}
		}
	}
	return l.Accounted()
}
