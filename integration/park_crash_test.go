package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	dir := t.TempDir()
	if keep := os.Getenv("LANES_CHILD_LOGS"); keep != "" { // keep the children's files (logs, calls) after the run
		var err error
		if dir, err = os.MkdirTemp(keep, "park-crash-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("children's files in %s", dir)
	}
	gate := filepath.Join(dir, "gate")
	calls := &callFiles{dir: dir, read: map[string]int64{}}
	n := 0
	spawn := func() *exec.Cmd {
		n++
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LANES_HELPER=consumer", "LANES_MEMBER="+fmt.Sprintf("p%d", n),
			"LANES_CALLS_FILE="+filepath.Join(dir, fmt.Sprintf("calls-%d.jsonl", n)),
			"LANES_CHILD_BROKERS="+strings.Join(c.brokers, ","), "LANES_GROUP="+groupName("park-crash"),
			"LANES_TOPIC="+topic, "LANES_DLQ="+dlq, "LANES_PARK=1", "LANES_STUCK="+strings.Join(stuck, ","), "LANES_GATE="+gate)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("child-%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	procs := []*exec.Cmd{spawn(), spawn()}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "child-*.log"))
			for _, name := range logs {
				b, _ := os.ReadFile(name)
				if len(b) > 12000 {
					b = b[len(b)-12000:]
				}
				t.Logf("%s (tail):\n%s", filepath.Base(name), b)
			}
		}
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	total := len(sessions) * per
	rest := total - len(stuck)*per
	for kills := 0; kills < 4 && calls.load(t, l) < rest; kills++ {
		waitProgress(t, calls, l, 100, rest)
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond) // a random point to kill at
		k := rng.IntN(len(procs))
		_ = procs[k].Process.Kill() // SIGKILL: no drain, no commit, no leave
		_ = procs[k].Wait()
		procs[k] = spawn()
	}
	waitLoaded(t, calls, l, rest, 5*time.Minute) // the others finish while the stuck sessions are parked
	if got := calls.load(t, l); got != rest {
		t.Fatalf("%d accounted while the stuck sessions fail; want %d", got, rest)
	}
	// One more kill while they are parked: the next owner rebuilds them.
	_ = procs[0].Process.Kill()
	_ = procs[0].Wait()
	procs[0] = spawn()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, calls, l, total, 5*time.Minute)
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		if err := p.Wait(); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	calls.load(t, l)
	c.readDLQ(t, dlq, l)
	t.Logf("%d consumer processes", n)
	assertClean(t, c, l.Report(), time.Since(start), true)
}

// waitLoaded waits until the children's calls account for n messages.
func waitLoaded(t *testing.T, calls *callFiles, l *lanestest.Ledger, n int, limit time.Duration) {
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
		time.Sleep(200 * time.Millisecond) // the children report through files: poll them
	}
}
