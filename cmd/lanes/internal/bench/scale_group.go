package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// memberGroup is the member processes of a --scale run and what they own.
type memberGroup struct {
	group string
	env   []string
	procs []*exec.Cmd
	stdin []io.WriteCloser
	wg    sync.WaitGroup

	mu      sync.Mutex
	owned   map[int]int               // member index → partitions it reports owning
	lat     map[int][latBuckets]int64 // member index → its latency counts so far
	exited  int                       // members whose output ended (they exited)
	changed chan struct{}
}

// spawn starts one more member process.
func (g *memberGroup) spawn() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("scale: find this program to run members: %w", err)
	}
	cmd := exec.Command(self, "bench")
	cmd.Env = append(os.Environ(), g.env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("scale: start a member: %w", err)
	}
	i := len(g.procs)
	g.procs, g.stdin = append(g.procs, cmd), append(g.stdin, in)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "partitions "); ok {
				v, _ := strconv.Atoi(n)
				g.note(func() { g.owned[i] = v })
			} else if l, ok := strings.CutPrefix(sc.Text(), "latencies "); ok {
				if h, ok := parseLatencies(l); ok {
					g.note(func() { g.lat[i] = h })
				}
			}
		}
		g.note(func() { g.exited++ })
	}()
	return nil
}

// note applies f under the lock and wakes waitSettled.
func (g *memberGroup) note(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
	close(g.changed)
	g.changed = make(chan struct{})
}

// latencies sums the members' latency counts so far.
func (g *memberGroup) latencies() [latBuckets]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [latBuckets]int64
	for _, h := range g.lat {
		for i, x := range h {
			out[i] += x
		}
	}
	return out
}

// waitChange waits until a member reports something.
func (g *memberGroup) waitChange(ctx context.Context) error {
	g.mu.Lock()
	ch := g.changed
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSettled waits until every member owns partitions and all of them
// are owned.
func (g *memberGroup) waitSettled(ctx context.Context, partitions int, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		sum, all, ch, exited := 0, len(g.owned) == len(g.procs), g.changed, g.exited
		for _, n := range g.owned {
			sum += n
			all = all && n > 0
		}
		g.mu.Unlock()
		if exited > 0 {
			return fmt.Errorf("%s exited (the errors are above)", cli.Count(exited, "member process"))
		}
		if all && sum == partitions {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("the group did not settle within %v: members own %d of %s", limit, sum, cli.Count(partitions, "partition"))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop closes every member's standard input and waits for them to exit.
func (g *memberGroup) stop() {
	for _, in := range g.stdin {
		_ = in.Close()
	}
	g.wg.Wait() // their output read to its end, before Wait closes it
	for _, p := range g.procs {
		_ = p.Wait()
	}
}
