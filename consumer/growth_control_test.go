package consumer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/control"
	"github.com/lanesdev/lanes/hashring"
)

// TestGrowthMovedWaitPaused: a session paused while its new record R
// waits as moved by a growth (2 → 6 partitions, on one member) is not
// handled until it is resumed, however the wait ends:
//
//   - older: its older record X, held back on its old partition q behind a
//     blocked record and 30 others (backpressure), reaches its lane while R
//     waits. X is not run by R's wait: R is given back behind it and the
//     lane sleeps on X.
//   - released: X was handled before the growth; R waits for q's floor,
//     which a blocked record of another session holds, and is released
//     once it is done. R is not delivered: the gate is asked again, and the
//     lane sleeps on R.
//
// Either way the stall watch reports no stall for three StallTimeouts (a
// paused session is no stall), and once resumed every record of every
// session is handled, in order. With NewBatch too; with parking on, X and
// R are parked instead (R behind X), with no attempt. Before the fix the
// moved wait ran X without the gate, and a released R went on to its
// handler: "session chat-0000 paused, yet handled 2 of its records" (the
// parked case passed before: process parked X as paused, and R after it).
func TestGrowthMovedWaitPaused(t *testing.T) {
	for _, tc := range []struct {
		name               string
		older, batch, park bool
	}{
		{"older", true, false, false},
		{"released", false, false, false},
		{"older-batch", true, true, false},
		{"released-batch", false, true, false},
		{"older-parked", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { movedWaitPaused(t, tc.older, tc.batch, tc.park) })
	}
}

func movedWaitPaused(t *testing.T, older, batch, park bool) {
	e := newEnv(t, 2, "chats", "chats.park")
	pl2 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 2}
	pl6 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 6}
	s, q, p := movedSession(2, 6)
	others := []string{"blocker"}
	if older {
		for i := range 30 {
			others = append(others, fmt.Sprintf("filler-%d", i))
		}
	}
	gate := make(chan struct{})
	rec := newRecorder(len(others)+2, heldByGate(gate))
	cfg := e.config("g", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = 8, 4
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.StallTimeout = 300 * time.Millisecond
	if park {
		cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}
	}
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	c := startRecorded(t, cfg, rec, batch)
	partOf := func(st Stats, id int32) PartitionStats {
		for _, ps := range st.Partitions {
			if ps.Partition == id {
				return ps
			}
		}
		return PartitionStats{}
	}
	if !older {
		e.produceAt("chats", s, 0, q, pl2) // X
		waitFor(t, "X handled", func() bool { return handledOf(rec, s) == 1 }, nil)
	}
	for _, o := range others {
		e.produceAt("chats", o, 0, q, pl2) // the blocker first
	}
	if older {
		e.produceAt("chats", s, 0, q, pl2) // X: behind the full buffer
		waitFor(t, "q full", func() bool { return partOf(c.Stats(), q).Paused },
			func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })
	}
	if park {
		e.grow("chats.park", 6) // a park topic has its topic's count
	}
	e.grow("chats", 6)
	waitFor(t, "the new partitions assigned", func() bool { return len(c.Stats().Partitions) == 6 }, nil)
	e.produceAt("chats", s, 1, p, pl6) // R
	waitFor(t, "R waiting", func() bool {
		g := c.Stats().Growing
		return len(g) == 1 && g[0].Waiting == 1
	}, func() string {
		return fmt.Sprintf("%+v; %d of s handled; %+v", c.Stats().Growing, handledOf(rec, s), c.Stats().Partitions)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.PauseSession(ctx, "chats", s, "moderation"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pause read", func() bool { return c.ctl.Paused(control.Key{Topic: "chats", Session: s}) }, nil)
	handled := handledOf(rec, s) // X, in the released case
	close(gate)
	waitFor(t, "the other sessions handled; the paused one handled, or asleep (parked)", func() bool {
		st := c.Stats()
		waits := st.Control.LanesPaused == 1
		if park {
			waits = partOf(st, q).Park.Records == 1 && partOf(st, p).Park.Records == 1
		}
		return len(rec.snapshot())-handledOf(rec, s) == len(others) && (handledOf(rec, s) > handled || waits)
	}, func() string { return fmt.Sprintf("%d calls; %+v", len(rec.snapshot()), c.Stats()) })
	if n := handledOf(rec, s); n != handled {
		t.Fatalf("session %s paused, yet handled %d of its records (X on %d, R on %d)", s, n, q, p)
	}
	// No signal says that the stall watch looked and found nothing: watch
	// for three StallTimeouts.
	held := []int32{p}
	if older {
		held = append(held, q)
	}
	stalls := c.Stats().Stalls
	for end := time.Now().Add(3 * cfg.StallTimeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		st := c.Stats()
		for _, id := range held {
			if ps := partOf(st, id); ps.Stalled || ps.HeldWaiting != "paused" && !park || st.Stalls != stalls {
				t.Fatalf("partition %+v, %d stalls (%d before): a paused session's partition waits, and is no stall", ps, st.Stalls, stalls)
			}
		}
	}
	if n := handledOf(rec, s); n != handled {
		t.Fatalf("session %s paused, yet handled %d of its records", s, n)
	}
	if _, err := c.ResumeSession(ctx, "chats", s); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, []string{s}, 2)
	checkOrder(t, rec, []string{"chats"}, others, 1)
}

// TestGrowthMovedWaitLimitedNoStall: a session whose new record R waits
// as moved by a growth (2 → 6 partitions, on one member) has a rate limit
// (Throttle.Session): the control gate admits its older record X, which
// arrives from its old partition q while R waits, but may hold it, so R is
// given back to its lane behind X (X is held back on q by backpressure
// behind 30 records and one of a session paused until R waits). X's
// handler then runs past StallTimeout (300 ms, SkipStalled on, no
// parking). R still waits as a moved session, behind its own older
// record: its partition p is no stall, and R is not dead-lettered as
// stalled (X, whose handler holds q, is). Once X's handler returns every
// record runs once, in order. With NewBatch too.
//
// The stall watch is known to have looked past R's StallTimeout when a
// record produced on another partition after X started (so after R was
// given back) is skipped as stalled, and then a second one produced after
// that: the watch's checks run one after another, so the check that
// skipped the first, which found p's clock at least as far on, has ended.
// Before the fix R, queued in an awake lane with p no longer excused, was
// dead-lettered as stalled, and never handled.
func TestGrowthMovedWaitLimitedNoStall(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { movedWaitLimited(t, batch) })
	}
}

func movedWaitLimited(t *testing.T, batch bool) {
	e := newEnv(t, 2, "chats", "dlq")
	pl2 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 2}
	pl6 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 6}
	s, q, p := movedSession(2, 6)
	o := 1 - q // the other old partition: the sentinels', never moved (stamped with the oldest count)
	others := []string{"blocker"}
	for i := range 30 {
		others = append(others, fmt.Sprintf("filler-%d", i))
	}
	sentinels := []string{"sentinel-1", "sentinel-2"}
	xGate, sGate := make(chan struct{}), make(chan struct{})
	started := map[string]chan struct{}{s: make(chan struct{}), sentinels[0]: make(chan struct{}), sentinels[1]: make(chan struct{})}
	var once sync.Map
	rec := newRecorder(len(others)+2+len(sentinels), func(ctx context.Context, m *Message) error {
		key := string(m.Record.Key)
		var until <-chan struct{}
		switch {
		case key == s && m.Record.Partition == q: // X
			until = xGate
		case strings.HasPrefix(key, "sentinel-"):
			until = sGate
		default:
			return nil
		}
		if _, done := once.LoadOrStore(key, true); !done {
			close(started[key])
		}
		select {
		case <-until:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	pauseBefore(t, e, "g", "chats", "blocker") // it holds q without a stall of its own
	cfg := e.config("g", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = 8, 4
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.Throttle = ThrottlePolicy{Session: Limit{Rate: 1000, Burst: 10}} // never holds here, but the gate may: X is not free (freeNow)
	cfg.StallTimeout, cfg.SkipStalled = 300*time.Millisecond, true
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	c := startRecorded(t, cfg, rec, batch)
	var release sync.Once // the handlers held return before the shutdown, however the test ends
	t.Cleanup(func() { release.Do(func() { close(xGate); close(sGate) }) })
	partOf := func(st Stats, id int32) PartitionStats {
		for _, ps := range st.Partitions {
			if ps.Partition == id {
				return ps
			}
		}
		return PartitionStats{}
	}
	state := func() string {
		st := c.Stats()
		return fmt.Sprintf("%d of s handled; growing %+v; dead-lettered %v; %+v", handledOf(rec, s), st.Growing, st.DeadLetteredByReason, st.Partitions)
	}
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(testTimeout):
			t.Fatalf("timed out waiting for %s: %s", what, state())
		}
	}
	waitFor(t, "the pause read", func() bool { return c.ctl.Paused(control.Key{Topic: "chats", Session: "blocker"}) }, state)
	for _, x := range others {
		e.produceAt("chats", x, 0, q, pl2) // the blocker first
	}
	e.produceAt("chats", s, 0, q, pl2) // X: behind the full buffer
	waitFor(t, "q full", func() bool { return partOf(c.Stats(), q).Paused }, state)
	e.grow("chats", 6)
	waitFor(t, "the new partitions assigned", func() bool { return len(c.Stats().Partitions) == 6 }, state)
	e.produceAt("chats", s, 1, p, pl6) // R
	waitFor(t, "R waiting", func() bool {
		g := c.Stats().Growing
		return len(g) == 1 && g[0].Waiting == 1
	}, state)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.ResumeSession(ctx, "chats", "blocker"); err != nil { // q moves on: X reaches its lane while R waits, and R is given back behind it
		t.Fatal(err)
	}
	wait("X's handler", started[s]) // admitted by the gate: R waits queued behind it
	for _, id := range sentinels {
		e.produceAt("chats", id, 0, o, pl2)
		wait(id+"'s handler", started[id])
		waitFor(t, id+" skipped as stalled", func() bool { return partOf(c.Stats(), o).Pending == 0 }, state)
	}
	waitFor(t, "X skipped as stalled", func() bool { return partOf(c.Stats(), q).Pending == 0 }, state) // its handler still runs
	st := c.Stats()
	if n := st.DeadLetteredByReason[ReasonStalled]; n != 3 {
		dead := readDLQ(t, e, int(st.DeadLettered))
		var named []string
		for _, r := range dead {
			named = append(named, fmt.Sprintf("%s (partition %s)", r.Value, header(r, HeaderDLQPartition)))
		}
		t.Fatalf("%d records dead-lettered as stalled, want 3 (X and the sentinels): %v; R (%s|1, partition %d) only waited as a moved session behind X", n, named, s, p)
	}
	if ps := partOf(st, p); ps.Stalled {
		t.Fatalf("partition %d reported stalled while R waits as moved: %+v", p, ps)
	}
	release.Do(func() { close(xGate); close(sGate) })
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, []string{s}, 2)
	checkOrder(t, rec, []string{"chats"}, append(others, sentinels...), 1)
	if n := c.Stats().DeadLetteredByReason[ReasonStalled]; n != 3 {
		t.Fatalf("%d records dead-lettered as stalled, want 3", n)
	}
	for _, pp := range c.own.all() { // each record excused as waiting is watched again once it waits no more
		pp.mu.Lock()
		n := len(pp.grow.waiting)
		pp.mu.Unlock()
		if n != 0 {
			t.Fatalf("partition %d: %d records still marked as waiting as moved sessions", pp.key.partition, n)
		}
	}
}

// startRecorded starts a member that hands each record to rec: a
// Handler, or a BatchHandler when batch.
func startRecorded(t *testing.T, cfg Config, rec *recorder, batch bool) *Consumer {
	t.Helper()
	c, err := New(cfg, rec)
	if batch {
		c, err = NewBatch(cfg, recordEach(rec))
	}
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	return c
}
