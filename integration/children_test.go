package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// children are consumer processes of one group: the test binary run again
// as helperConsumer, each writing its handler calls to its own file in
// dir, read into a Ledger by calls.
type children struct {
	t     *testing.T
	dir   string
	env   []string
	n     int
	calls *callFiles

	mu    sync.Mutex           // a graceful stop may run beside a spawn
	procs map[string]*exec.Cmd // running, by member name
	ready map[string]chan struct{}

	// Members killed, and when: a broker must count them gone
	// (ghosts).
	killed     map[string]time.Time
	ghostCheck time.Time            // the last look for ghosts
	ghostSeen  map[string]time.Time // member ID → first seen in the stable group, killed
	reaped     int                  // ghosts removed (kfake)
	admin      *kgo.Client          // for ghosts, made at the first look
}

// childReadyFD is the descriptor on which a child says it is ready: its
// SIGTERM handler is installed (a SIGTERM before that kills it outright).
const childReadyFD = 3

func newChildren(t *testing.T, brokers []string, group, topic, dlq string) *children {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("LANES_CHILD_LOGS"); keep != "" { // keep the children's files (logs, calls) after the run
		var err error
		if dir, err = os.MkdirTemp(keep, group+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("children's files in %s", dir)
	}
	ch := &children{t: t, dir: dir, procs: map[string]*exec.Cmd{}, ready: map[string]chan struct{}{},
		killed: map[string]time.Time{},
		calls:  &callFiles{dir: dir, read: map[string]int64{}},
		env: append(os.Environ(), "LANES_HELPER=consumer", "LANES_CHILD_BROKERS="+strings.Join(brokers, ","),
			"LANES_GROUP="+group, "LANES_TOPIC="+topic, "LANES_DLQ="+dlq)}
	t.Cleanup(func() { // a failed test must not leave consumers running
		ch.mu.Lock()
		defer ch.mu.Unlock()
		for _, p := range ch.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		if t.Failed() {
			ch.logTails()
		}
	})
	return ch
}

// spawn starts one more consumer process, with env added to its
// environment, and returns its member name (from the test's goroutine
// only).
func (ch *children) spawn(env ...string) string {
	ch.t.Helper()
	ch.n++
	name := fmt.Sprintf("p%d", ch.n)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.Concat(ch.env, env), "LANES_MEMBER="+name,
		"LANES_CALLS_FILE="+filepath.Join(ch.dir, fmt.Sprintf("calls-%d.jsonl", ch.n)))
	// A file, not the test's stderr: a child must never hold go test's
	// output pipe open.
	logf, err := os.Create(filepath.Join(ch.dir, fmt.Sprintf("child-%d.log", ch.n)))
	if err != nil {
		ch.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	r, w, err := os.Pipe()
	if err != nil {
		ch.t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w} // the child's childReadyFD
	if err := cmd.Start(); err != nil {
		ch.t.Fatal(err)
	}
	w.Close()
	ready := make(chan struct{})
	go func() { // ends with the child's byte, or its exit (EOF)
		defer close(ready)
		defer r.Close()
		_, _ = r.Read(make([]byte, 1))
	}()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.procs[name] = cmd
	ch.ready[name] = ready
	return name
}

// names returns the running members' names.
func (ch *children) names() []string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var out []string
	for n := range ch.procs {
		out = append(out, n)
	}
	return out
}

// kill ends member name with SIGKILL: no drain, no commit, no leave.
func (ch *children) kill(name string) {
	p := ch.take(name)
	_ = p.Process.Kill()
	_ = p.Wait()
	ch.mu.Lock()
	ch.killed[name] = time.Now()
	ch.mu.Unlock()
}

// term ends member name with SIGTERM (a graceful shutdown: drain, commit,
// leave) once it is ready to take it, and returns its exit error.
func (ch *children) term(name string) error {
	ch.mu.Lock()
	ready := ch.ready[name]
	ch.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		return fmt.Errorf("consumer process %s: not ready after a minute", name)
	}
	p := ch.take(name)
	_ = p.Process.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		return fmt.Errorf("consumer process %s: %w", name, err)
	}
	return nil
}

// take removes member name from the running ones and returns its process.
func (ch *children) take(name string) *exec.Cmd {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	p := ch.procs[name]
	delete(ch.procs, name)
	delete(ch.ready, name)
	return p
}

// logTails logs the end of every child's log (on failure).
func (ch *children) logTails() {
	logs, _ := filepath.Glob(filepath.Join(ch.dir, "child-*.log"))
	for _, name := range logs {
		b, _ := os.ReadFile(name)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		ch.t.Logf("%s (tail):\n%s", filepath.Base(name), b)
	}
}

// TestChildTermRightAfterSpawn: a consumer process stopped the moment it
// was started shuts down cleanly (exit 0): term waits until the child
// handles SIGTERM, which would otherwise kill it outright.
func TestChildTermRightAfterSpawn(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 1)
	ch := newChildren(t, c.brokers, groupName("term-at-once"), topic, dlq)
	for range 3 {
		if err := ch.term(ch.spawn()); err != nil {
			t.Fatal(err)
		}
	}
}
