package consumer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// asleep counts the control functions of one test cluster that are in
// kfake's SleepControl, so that the cluster is closed only once none is.
//
// kfake deadlocks, and leaks, its run loop when Close meets a control
// function that is beginning or ending a sleep: SleepControl returns on the
// cluster's death, the function's goroutine then takes the control mutex
// and keeps it (the run loop was to release it), and the run loop, which
// had already taken the wake-up or the sleep from its channel, waits on
// that mutex for ever. goleak at the end of the package then fails the
// suite, whichever test it was (CI, 2026-12-05). TestKfakeCloseMeetsSleep
// pins the bug.
//
// Every sleep goes through env.sleep or env.sleepFor. The env's cleanup
// wakes every sleep, waits until each has returned from SleepControl (the
// run loop resumed it), and only then closes the cluster; a sleep asked
// for after that does not sleep.
type asleep struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by env.close: every sleep wakes
	wg      sync.WaitGroup

	beforeClose func() // a test's hook, between the wait and the close
}

// wrapEnv is the env of the cluster c, which it closes at the test's end
// once no control function sleeps.
func wrapEnv(t *testing.T, c *kfake.Cluster) *env {
	e := &env{t: t, c: c, addrs: c.ListenAddrs(), asleep: &asleep{closing: make(chan struct{})}}
	t.Cleanup(e.close)
	return e
}

// sleep is kfake's SleepControl until wake is closed, or the test ends. It
// is called from a control function, as SleepControl is.
func (e *env) sleep(wake <-chan struct{}) {
	e.sleepUntil(func(closing <-chan struct{}) {
		select {
		case <-wake:
		case <-closing:
		}
	})
}

// sleepFor is kfake's SleepControl for d (a slow broker), or until the test
// ends.
func (e *env) sleepFor(d time.Duration) {
	e.sleepUntil(func(closing <-chan struct{}) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-closing:
		}
	})
}

func (e *env) sleepUntil(wait func(closing <-chan struct{})) {
	s := e.asleep
	if s == nil {
		panic("consumer test: env.sleep on an env not made by wrapEnv (newEnv, newGroupEnv, topicsEnv)")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	e.c.SleepControl(func() { wait(s.closing) })
}

// close wakes every sleep, waits for each to return, then closes the
// cluster.
func (e *env) close() {
	s := e.asleep
	s.mu.Lock()
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		e.t.Errorf("kfake: a control function still in SleepControl %v after the test ended; closing the cluster anyway (its run loop may leak)", testTimeout)
	}
	if s.beforeClose != nil {
		s.beforeClose()
	}
	e.c.Close()
}

// sleepCloseRounds runs rounds rounds of: a ListOffsets request whose
// control function sleeps, the sleep woken, the cluster closed at once
// (after a few scheduler yields, a different count each round: the race
// is narrow). With throughEnv the sleep and the close go through
// env.sleep and env.close.
func sleepCloseRounds(t *testing.T, rounds int, throughEnv bool) {
	for i := range rounds {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, c: c, addrs: c.ListenAddrs(), asleep: &asleep{closing: make(chan struct{})}}
		wake, in := make(chan struct{}), make(chan struct{}, 1)
		c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
			select {
			case in <- struct{}{}:
			default:
			}
			if throughEnv {
				e.sleep(wake)
			} else {
				c.SleepControl(func() { <-wake })
			}
			return nil, nil, false
		})
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...))
		if err != nil {
			t.Fatal(err)
		}
		var asked sync.WaitGroup
		asked.Go(func() {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, _ = req.RequestWith(ctx, cl) // answered, or cut by the close
		})
		yield := func() {
			for range i % 64 * 20 {
				runtime.Gosched()
			}
		}
		<-in
		if throughEnv {
			e.asleep.beforeClose = yield
			e.close() // wakes the sleep itself
		} else {
			close(wake)
			yield()
			c.Close()
		}
		cl.Close()
		asked.Wait()
	}
}

// TestEnvSleepsEndBeforeClose: a test cluster closed just as its sleeping
// control function wakes keeps no goroutine once the sleep goes through
// env.sleep and env.close. Without the wait in env.close (close(wake);
// c.Close()) kfake's run loop leaks within 1,000 rounds under two busy
// loops.
func TestEnvSleepsEndBeforeClose(t *testing.T) {
	rounds := longtest.Size(t, 1000, 200)
	before := goleak.IgnoreCurrent()
	sleepCloseRounds(t, rounds, true)
	if err := goleak.Find(before); err != nil {
		t.Fatalf("%d rounds through env.sleep and env.close left goroutines: %v", rounds, err)
	}
}

// TestKfakeCloseMeetsSleep pins the kfake bug env.close works around, and
// says when it can go: a cluster closed as a control function wakes from
// SleepControl must end its run loop. It runs the rounds in a child
// process (the bug leaks goroutines, which would fail this package's
// goleak check) and passes at the first leaked run loop; it fails when
// 3,000 rounds leak none (then kfake is fixed: drop asleep).
func TestKfakeCloseMeetsSleep(t *testing.T) {
	if os.Getenv("LANES_KFAKE_SLEEP_CHILD") != "" {
		sleepCloseRounds(t, 3000, false)
		if err := goleak.Find(); err != nil && strings.Contains(err.Error(), "kfake.(*Cluster).run(") {
			fmt.Printf("LEAKED: %d kfake run loops in 3,000 rounds\n", strings.Count(err.Error(), "kfake.(*Cluster).run("))
		}
		os.Exit(0) // leaked goroutines or not: the parent judges
	}
	longtest.Only(t, "the kfake close-meets-sleep check (5-30 s)")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKfakeCloseMeetsSleep$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LANES_KFAKE_SLEEP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "LEAKED: ") {
		t.Fatalf("3,000 clusters closed as a sleep woke leaked no kfake run loop: kfake may be fixed; drop asleep (kfake_sleep_test.go) if it is\n%s", out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
