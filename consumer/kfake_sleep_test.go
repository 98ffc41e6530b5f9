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
// kfake deadlocks, and leaks goroutines, when Close meets a control
// function in SleepControl: SleepControl returns on the cluster's death,
// and the function's goroutine then takes the control mutex and keeps it
// (the run loop was to release it). Whatever takes that mutex next waits
// for ever: the run loop, when it had already taken the sleep's wake-up
// or start from its channel (about 1 % of closes timed so; what CI met on
// 2026-12-05, goleak failing the package at its end, whichever test it
// was), or a second control function leaving its sleep the same way
// (every time). TestKfakeCloseMeetsSleep pins the bug.
//
// Every sleep goes through env.sleep or env.sleepFor. The env's cleanup
// wakes every sleep, waits until each has returned from SleepControl (the
// run loop resumed it), and only then closes the cluster; a sleep asked
// for after that does not sleep.
type asleep struct {
	mu      sync.Mutex    // orders a sleep's start (wg.Add) before close's wait
	once    sync.Once     // close: the test's own, then its cleanup's
	closing chan struct{} // closed by env.close: every sleep wakes, none starts
	wg      sync.WaitGroup

	beforeClose func() // a test's hook, between the wait and the close
}

// wrapEnv is the env of the cluster c, which it closes at the test's end
// once no control function sleeps.
func wrapEnv(t *testing.T, c *kfake.Cluster) *env {
	e := envOf(t, c)
	t.Cleanup(e.close)
	return e
}

// envOf is the env of the cluster c; its caller closes it (env.close).
func envOf(t *testing.T, c *kfake.Cluster) *env {
	return &env{t: t, c: c, addrs: c.ListenAddrs(), asleep: &asleep{closing: make(chan struct{})}}
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
	select {
	case <-s.closing: // the test ended: no sleep
		s.mu.Unlock()
		return
	default:
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	e.c.SleepControl(func() { wait(s.closing) })
}

// close wakes every sleep, waits for each to return, then closes the
// cluster; it does so once (a test may close its cluster itself, then its
// cleanup does nothing).
func (e *env) close() {
	e.asleep.once.Do(e.closeOnce)
}

func (e *env) closeOnce() {
	s := e.asleep
	s.mu.Lock()
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
		e.t.Errorf("kfake: a control function still in SleepControl %v after the test ended; closing the cluster anyway (kfake may leak)", testTimeout)
	}
	if s.beforeClose != nil {
		s.beforeClose()
	}
	e.c.Close()
}

// askListOffsets sends one ListOffsets request for topic t through cl,
// answered or cut by the cluster's close.
func askListOffsets(cl *kgo.Client) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, _ = req.RequestWith(ctx, cl)
}

// TestEnvSleepsEndBeforeClose: a test cluster closed just as its sleeping
// control function wakes keeps no goroutine once the sleep goes through
// env.sleep and env.close. Each round wakes the sleep (env.close does)
// and closes the cluster after a few scheduler yields, a different count
// each round: the race is narrow. Without the wait in env.close this
// leaked kfake's run loop 3 to 10 times in 1,000 rounds.
func TestEnvSleepsEndBeforeClose(t *testing.T) {
	rounds := longtest.Size(t, 1000, 200)
	before := goleak.IgnoreCurrent()
	for i := range rounds {
		sleepCloseRound(t, i)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("%d rounds through env.sleep and env.close left goroutines: %v", rounds, err)
	}
}

// sleepCloseRound is round i of TestEnvSleepsEndBeforeClose: a ListOffsets
// request whose control function sleeps through env.sleep, then env.close
// (deferred: also after a failure) with i%64*20 scheduler yields between
// its wait and the cluster's close.
func sleepCloseRound(t *testing.T, i int) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	e := envOf(t, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...))
	if err != nil {
		e.close()
		t.Fatal(err)
	}
	var asked sync.WaitGroup
	defer func() { // the close first: it ends the sleep the request waits on
		e.close()
		cl.Close()
		asked.Wait()
	}()
	e.asleep.beforeClose = func() {
		for range i % 64 * 20 {
			runtime.Gosched()
		}
	}
	in := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case in <- struct{}{}:
		default:
		}
		e.sleep(nil) // until env.close
		return nil, nil, false
	})
	asked.Go(func() { askListOffsets(cl) })
	select {
	case <-in:
	case <-time.After(testTimeout):
		t.Fatalf("round %d: the ListOffsets request did not reach its control function in %v", i, testTimeout)
	}
}

// TestKfakeCloseMeetsSleep pins the kfake bug env.close works around, and
// says when it can go: two control functions asleep (SleepControl, on two
// connections, never woken) as the cluster closes must both return and
// leave no goroutine. In kfake the first to return keeps the control
// mutex, and the second waits for it for ever. The cluster is closed in a
// child process (the leak would fail this package's goleak check), which
// reports the goroutines left; the test passes while one is, and fails
// once kfake leaves none (then drop asleep, and this test).
func TestKfakeCloseMeetsSleep(t *testing.T) {
	if os.Getenv("LANES_KFAKE_SLEEP_CHILD") != "" {
		twoSleepersClosed(t)
		return
	}
	longtest.Only(t, "the kfake close-meets-sleep check (a child process, about 1 s)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKfakeCloseMeetsSleep$", "-test.count=1", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), "LANES_KFAKE_SLEEP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "LEAKED: ") {
		t.Fatalf("two control functions asleep as kfake closed left no goroutine of kfake's: kfake may be fixed. Before dropping asleep (kfake_sleep_test.go) and this test, run TestEnvSleepsEndBeforeClose with env.close's wait removed: it must leak nothing either\n%s", out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// twoSleepersClosed is TestKfakeCloseMeetsSleep's child: it closes a
// cluster with two control functions asleep, waits for both sleeps to
// return, prints what kfake left ("LEAKED: ..."), and exits without the
// package's goleak check.
func twoSleepersClosed(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	var asleep, returned sync.WaitGroup
	asleep.Add(2)
	returned.Add(2)
	never := make(chan struct{}) // closed only after the close: the sleeps end by it
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { asleep.Done(); <-never })
		returned.Done()
		return nil, nil, false
	})
	var clients []*kgo.Client
	for range 3 { // two sleepers on their own connections (one request at a time each), and a third
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	for _, cl := range clients[:2] {
		go askListOffsets(cl)
	}
	asleep.Wait()
	// The run loop handles one request at a time: once it answers one
	// sent after both control functions ran, it has taken both sleeps.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, clients[2]); err != nil {
		t.Fatalf("metadata after both sleeps began: %v", err)
	}
	c.Close()
	returned.Wait()
	close(never)
	for _, cl := range clients {
		cl.Close()
	}
	if err := goleak.Find(before); err != nil && strings.Contains(err.Error(), "kfake.") {
		fmt.Printf("LEAKED: kfake goroutines after a close with two sleeps: %v\n", err)
	} else {
		fmt.Println("no kfake goroutine left")
	}
	os.Exit(0) // the parent judges; the leak must not fail this process
}
