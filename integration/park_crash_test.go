package integration

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// parkHelper is the parking part of a crash scenario's child process: the
// policy, and a handler whose sessions listed in LANES_STUCK fail until
// the file LANES_GATE exists.
func parkHelper(h consumer.Handler) (consumer.ParkPolicy, consumer.Handler) {
	stuck := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("LANES_STUCK"), ",") {
		stuck[s] = true
	}
	gate := os.Getenv("LANES_GATE")
	pol := consumer.ParkPolicy{Enabled: true, AfterAttempts: 3, Delay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond, MaxAttempts: 100000}
	return pol, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		session, _, _ := strings.Cut(string(m.Record.Value), "|")
		if stuck[session] {
			if _, err := os.Stat(gate); err != nil {
				return errStuck
			}
		}
		return h.Handle(ctx, m)
	})
}

// TestParkCrash: consumers run as child processes with parking on, two
// sessions stuck; they are killed with SIGKILL at random points (between
// park writes and commits, during rebuilds) and restarted. The other
// sessions finish while the stuck ones are parked; then the stuck ones
// recover. Nothing is lost, no session runs out of order.
func TestParkCrash(t *testing.T) {
	longOnly(t, "the park crash scenario")
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	stuck := []string{sessions[5], sessions[44]}
	const per = 100
	start := time.Now()
	c.produce(t, topic, sessions, per, l)
	group := groupName("park-crash")
	ch := newChildren(t, c.brokers, group, topic, dlq)
	gate := filepath.Join(ch.dir, "gate")
	env := []string{"LANES_PARK=1", "LANES_STUCK=" + strings.Join(stuck, ","), "LANES_GATE=" + gate}
	procs := []string{ch.spawn(env...), ch.spawn(env...)}
	ghosts := func() { ch.ghosts(c, group) } // a child killed while its JoinGroup waited: kfake keeps it
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	total := len(sessions) * per
	rest := total - len(stuck)*per
	for kills := 0; kills < 4 && ch.calls.load(t, l) < rest; kills++ {
		waitProgress(t, ch.calls, l, 100, rest, ghosts)
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond) // a random point to kill at
		k := rng.IntN(len(procs))
		ch.kill(procs[k]) // SIGKILL: no drain, no commit, no leave
		procs[k] = ch.spawn(env...)
	}
	waitLoaded(t, ch.calls, l, rest, 5*time.Minute, ghosts) // the others finish while the stuck sessions are parked
	if got := ch.calls.load(t, l); got != rest {
		t.Fatalf("%d accounted while the stuck sessions fail; want %d", got, rest)
	}
	// One more kill while they are parked: the next owner rebuilds them.
	ch.kill(procs[0])
	procs[0] = ch.spawn(env...)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, ch.calls, l, total, 5*time.Minute, ghosts)
	for _, p := range procs {
		if err := ch.term(p); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	ch.calls.load(t, l)
	c.readDLQ(t, dlq, l)
	t.Logf("%d consumer processes, %d members of killed processes removed from the group (kfake kept them)", ch.n, ch.reaped)
	assertClean(t, c, l.Report(), time.Since(start), true)
}

// waitLoaded waits until the children's calls account for n messages,
// calling each of each at every look.
func waitLoaded(t *testing.T, calls *callFiles, l *lanestest.Ledger, n int, limit time.Duration, each ...func()) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for calls.load(t, l) < n {
		if time.Now().After(deadline) {
			r := l.Report()
			t.Logf("%s", r)
			for _, d := range r.Details {
				t.Log(d)
			}
			t.Fatalf("timed out: %d of %d finished", l.Accounted(), n)
		}
		for _, f := range each {
			f()
		}
		time.Sleep(200 * time.Millisecond) // the children report through files: poll them
	}
}
