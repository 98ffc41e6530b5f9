package consumer

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/control"
	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// TestPausedMemory measures what a paused session costs a member without
// parking: 10,000 sessions (1,000 in the quick form) paused, each with 2
// records waiting, beside 100 sessions that run. Every paused lane sleeps
// without a worker (no goroutine each: the member has at most a few more
// than once they are resumed and handled), and the heap they hold, against
// the same member once they ran, is logged per paused session
// (docs/control.md) and bounded here by 8 KiB each: its two records, its
// lane and its entry in the gate.
func TestPausedMemory(t *testing.T) {
	n := longtest.Size(t, 10_000, 1_000)
	e := newEnv(t, 4, "chats", "dlq")
	paused := make([]string, n)
	for i := range paused {
		paused[i] = fmt.Sprintf("paused-%05d", i)
	}
	writeControl(t, e, "g-mem", paused, true)
	runs := sessionNames(100)
	rec := newRecorder(len(runs)*2+n*2, nil)
	cfg := e.config("g-mem", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 50 * time.Millisecond}
	cfg.MaxBufferedRecords = 4 * n // the paused records fit: what they cost is measured, not the bound
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produce("chats", runs, 2)
	e.produce("chats", paused, 2)
	waitFor(t, "every paused session's lane asleep, the others handled", func() bool {
		return c.Stats().Control.LanesPaused == n && len(rec.snapshot()) == len(runs)*2
	}, func() string { return fmt.Sprintf("%d lanes paused of %d", c.Stats().Control.LanesPaused, n) })
	pausedHeap, pausedGo := heapNow(), runtime.NumGoroutine()
	writeControl(t, e, "g-mem", paused, false) // resumed: their records run and their lanes end
	rec.wait(t)
	waitFor(t, "every lane ended", func() bool { return c.Stats().ActiveSessions == 0 }, func() string { return fmt.Sprint(c.Stats().ActiveSessions) })
	c.lanes.retire(0)
	afterHeap, afterGo := heapNow(), runtime.NumGoroutine()
	held := int64(pausedHeap) - int64(afterHeap) // the broker's copy of the records stays in both
	gor := pausedGo - afterGo
	per := held / int64(n)
	t.Logf("%d paused sessions, 2 records each: %d KiB held while paused, %d B per paused session; goroutines %+d against none paused", n, held>>10, per, gor)
	// The heap is shared with the embedded broker and the clients, so the
	// figure is noisy (1.3 KiB typical at full size); the bound catches a
	// goroutine or a buffer per paused session, at full size only (the
	// quick form's 1,000 are within the noise).
	if !testing.Short() && per > 8<<10 {
		t.Errorf("a paused session holds %d B; want at most 8 KiB", per)
	}
	if gor > 16 {
		t.Errorf("%d more goroutines with %d paused sessions: a paused lane must hold no worker", gor, n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// writeControl pauses (or resumes) sessions of "chats" for group by
// writing their control entries at once (PauseSession writes one at a
// time).
func writeControl(t *testing.T, e *env, group string, sessions []string, pause bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ct, err := ControlTarget{Brokers: e.addrs, Group: group}.validate()
	if err != nil {
		t.Fatal(err)
	}
	cl := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := ensureControlTopic(ctx, kadm.NewClient(cl), ct); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, len(sessions))
	for i, s := range sessions {
		k, v, err := control.Encode(group, control.Key{Topic: "chats", Session: s}, control.Setting{Paused: pause, By: "test", At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: DefaultControlTopic, Key: k, Value: v}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
