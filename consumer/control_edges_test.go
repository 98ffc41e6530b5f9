package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPauseParkedOtherOrders: with parking on and a topic ordered by
// partition or not at all, a paused session is not handled. (Found by
// review: its records were parked under their lane, the partition's or
// the record's own, which names no session, and retried after Park.Delay.
// Now they wait in their lanes.)
func TestPauseParkedOtherOrders(t *testing.T) {
	for _, o := range []Order{OrderPartition, OrderNone} {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			e := newEnv(t, 1, "chats", "chats.park", "dlq")
			sessions := sessionNames(4)
			const paused = "chat-0002"
			group := fmt.Sprintf("g-adv-pp-%d", o)
			pauseBefore(t, e, group, "chats", paused)
			e.produce("chats", sessions, 3)
			rec := newRecorder(12, nil)
			cfg := e.config(group, "chats")
			cfg.Order = map[string]Order{"chats": o}
			cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
			cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}
			c, err := New(cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			others := 9 // OrderNone: every record of the other sessions
			if o == OrderPartition {
				others = 2 // the partition waits behind the paused record, third in it (docs/control.md)
			}
			waitFor(t, "the others handled, the paused session's records waiting in their lanes", func() bool {
				return len(rec.snapshot()) == others && c.Stats().Control.LanesPaused > 0
			}, func() string { return fmt.Sprintf("%d calls, %+v", len(rec.snapshot()), c.Stats().Control) })
			n := handledOf(rec, paused)
			st := c.Stats()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("order %v: the paused session was handled %d times while paused (%d calls in all; paused parked %d)", o, n, len(rec.snapshot()), st.Control.PausedParked)
			}
		})
	}
}

// TestResumedNotSkipped: a session paused for longer than StallTimeout
// (no parking, SkipStalled on) is resumed; its records each run well
// within StallTimeout. None is dead-lettered as stalled. (Found by
// review: the stall clock counted the pause, and its head was skipped as
// stalled once it ran.)
func TestResumedNotSkipped(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(2)
	const paused = "chat-0000"
	pauseBefore(t, e, "g-adv-resume", "chats", paused)
	e.produce("chats", sessions, 3)
	rec := newRecorder(6, func(_ context.Context, m *Message) error {
		if m.SessionID == paused {
			time.Sleep(150 * time.Millisecond) // well under StallTimeout
		}
		return nil
	})
	cfg := e.config("g-adv-resume", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.StallTimeout, cfg.SkipStalled = 400*time.Millisecond, true
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the other session handled", func() bool { return len(rec.snapshot()) == 3 }, func() string { return fmt.Sprintf("%+v", c.Stats()) })
	paused0 := time.Now()
	waitFor(t, "paused for two StallTimeouts", func() bool { return time.Since(paused0) > 2*cfg.StallTimeout }, func() string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.ResumeSession(ctx, "chats", paused); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	st := c.Stats()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st.DeadLettered != 0 || st.Stalls != 0 {
		t.Fatalf("after the resume: %d dead-lettered, %d stalls; calls %+v", st.DeadLettered, st.Stalls, rec.snapshot())
	}
}

// TestControlTopicTxnMarker: another writer wrote to the control topic in
// a transaction: its end offset is past a commit marker. The member reads
// to the end all the same and handles its records. (Found by review: the
// read waited for a record at end-1, the marker, for ever.)
func TestControlTopicTxnMarker(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq", DefaultControlTopic)
	tx := e.client(kgo.TransactionalID("other-writer"), kgo.DefaultProduceTopic(DefaultControlTopic))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte("not-lanes"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	sessions := sessionNames(3)
	e.produce("chats", sessions, 2)
	rec := newRecorder(6, nil)
	cfg := e.config("g-adv-txn", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.CommitTimeout = time.Second
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestControlTopicBlip: one metadata answer that says the control topic is
// unknown (a broker with stale metadata, a blip during a roll) does not
// resume the paused sessions. (Found by review: the member dropped every
// setting on it.)
func TestControlTopicBlip(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(3)
	const paused = "chat-0001"
	pauseBefore(t, e, "g-adv-blip", "chats", paused)
	e.produce("chats", sessions, 2)
	rec := newRecorder(6, nil)
	cfg := e.config("g-adv-blip", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the others handled", func() bool { return len(rec.snapshot()) == 4 && c.Stats().Control.LanesPaused == 1 }, nil)
	var blips atomic.Int32
	e.c.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != DefaultControlTopic {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = req.Version
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(DefaultControlTopic)
		rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, rt)
		blips.Add(1)
		return resp, nil, true // once
	})
	waitFor(t, "the blip answered, and a read after it", func() bool { return blips.Load() == 1 && !c.ctlLog.missing.Load() },
		func() string { return fmt.Sprint(blips.Load(), c.ctlLog.missing.Load()) })
	n := handledOf(rec, paused)
	st := c.Stats()
	_ = stop()
	if n != 0 {
		t.Fatalf("the paused session was handled %d times after one metadata blip; its setting now %+v", n, st.Control.Sessions)
	}
}

// TestWaitingAfterRevoke: Stats.Control.Sessions[].Waiting is this
// member's lanes waiting for each paused session, also after a rebalance
// moved some away. (Found by review: their wakes stayed in the gate.)
func TestWaitingAfterRevoke(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(10)
	for _, s := range sessions {
		pauseBefore(t, e, "g-adv-wait", "chats", s)
	}
	e.produce("chats", sessions, 1)
	cfg := e.config("g-adv-wait", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	a, err := New(cfg, newRecorder(10, nil))
	if err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	defer stopA()
	waitFor(t, "10 lanes paused on A", func() bool { return a.Stats().Control.LanesPaused == 10 }, nil)
	b, err := New(cfg, newRecorder(10, nil))
	if err != nil {
		t.Fatal(err)
	}
	stopB := start(t, b)
	defer stopB()
	waitFor(t, "a partition moved to B", func() bool {
		return len(a.Stats().Partitions) == 1 && b.Stats().Control.LanesPaused > 0
	}, nil)
	var st Stats
	waiting := 0
	waitFor(t, "A's paused lanes, as Waiting counts them, down to those of its partition", func() bool {
		st, waiting = a.Stats(), 0
		for _, s := range st.Control.Sessions {
			waiting += s.Waiting
		}
		return waiting == st.Control.LanesPaused && waiting < 10
	}, func() string {
		return fmt.Sprintf("A: %d lanes paused, but Sessions' Waiting adds up to %d", st.Control.LanesPaused, waiting)
	})
}

// TestLimitRemovedWakes: a session limited to one record every 20 s has
// its limit removed (lanes session limit --rate 0): its waiting lane wakes
// and its records run. (Found by review: it slept until the old limit's
// alarm.)
func TestLimitRemovedWakes(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	const slow = "chat-0000"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := LimitSession(ctx, controlTarget(e, "g-adv-unlimit"), "chats", slow, Limit{Rate: 0.05, Burst: 1}, "typo"); err != nil {
		t.Fatal(err)
	}
	e.produce("chats", []string{slow}, 3)
	rec := newRecorder(3, nil)
	cfg := e.config("g-adv-unlimit", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	defer stop()
	waitFor(t, "the lane held by the rate", func() bool { return c.Stats().Control.LanesThrottled == 1 }, nil)
	if _, err := c.LimitSession(ctx, "chats", slow, Limit{}, ""); err != nil {
		t.Fatal(err)
	}
	rec.wait(t) // within testTimeout; the old limit would take 40 s more
}

// TestControlToggleStress: settings flip (pause, rate, none) every few
// hundred microseconds, straight into the gate as controlRead would apply
// them, while 40 sessions' records flow (also with a default rate and a
// resource slot). Order, no overlap, none lost once all is resumed.
func TestControlToggleStress(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			e := newEnv(t, 3, "chats", "dlq")
			sessions := sessionNames(40)
			e.produce("chats", sessions, 25)
			rec := newRecorder(1000, func(context.Context, *Message) error {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				return nil
			})
			group := fmt.Sprintf("g-adv-stress-%v", batch)
			cfg := e.config(group, "chats")
			cfg.Control = ControlPolicy{Enabled: true, Interval: 5 * time.Millisecond}
			cfg.Throttle = ThrottlePolicy{Session: Limit{Rate: 2000, Burst: 3},
				Resource: func(r *kgo.Record) string { return string(r.Key[len(r.Key)-1:]) },
				Default:  Limit{Concurrency: 2, Rate: 3000, Burst: 5}}
			var c *Consumer
			var err error
			if batch {
				cfg.MaxBatch = 3
				c, err = NewBatch(cfg, BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
					for _, m := range ms {
						if err := rec.Handle(ctx, m); err != nil {
							return &BatchError{Done: 0, Err: err}
						}
					}
					return nil
				}))
			} else {
				c, err = New(cfg, rec)
			}
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					k := control.Key{Topic: "chats", Session: sessions[rand.IntN(len(sessions))]}
					var s control.Setting
					switch rand.IntN(4) {
					case 0, 1:
						s.Paused = true
					case 2:
						s.Rate, s.Burst = float64(50+rand.IntN(500)), rand.IntN(3)
					}
					was, _ := c.ctl.Setting(k)
					ws := c.ctl.Apply(k, s, time.Now())
					var keys []control.Key
					if was.Paused && !s.Paused {
						keys = append(keys, k)
					}
					c.resumed(ws, keys)
					time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond)
				}
			}()
			waitFor(t, "half the records handled while the settings flip", func() bool { return len(rec.snapshot()) >= 500 },
				func() string { return fmt.Sprint(len(rec.snapshot())) })
			close(done)
			wg.Wait()
			for _, s := range c.ctl.Snapshot() {
				c.resumed(c.ctl.Apply(s.Key, control.Setting{}, time.Now()), []control.Key{s.Key})
			}
			rec.wait(t)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			checkOrder(t, rec, []string{"chats"}, sessions, 25)
			if n := len(rec.snapshot()); n != 1000 {
				t.Errorf("%d calls for 1000 records (duplicates?)", n)
			}
		})
	}
}

// TestControlTopicEmptied: the control topic's records are all gone
// (DeleteRecords, or a delete policy's retention): its log starts at its
// end. PauseSession still writes to it, and a member starting then reads
// it and handles its records. (Found by review: both waited for a record
// at end-1 for ever.)
func TestControlTopicEmptied(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	pauseBefore(t, e, "g-adv-empty", "chats", "chat-0001")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := ResumeSession(ctx, controlTarget(e, "g-adv-empty"), "chats", "chat-0001"); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(e.client())
	ends, err := adm.ListEndOffsets(ctx, DefaultControlTopic)
	if err != nil {
		t.Fatal(err)
	}
	var os kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset}) })
	if _, err := adm.DeleteRecords(ctx, os); err != nil {
		t.Fatal(err)
	}
	if _, err := PauseSession(ctx, controlTarget(e, "g-adv-empty"), "chats", "chat-0002", "the fix"); err != nil {
		t.Fatalf("PauseSession on the emptied control topic: %v", err)
	}
	sessions := sessionNames(3)
	e.produce("chats", sessions, 2)
	rec := newRecorder(4, nil) // chat-0002 paused
	cfg := e.config("g-adv-empty", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.CommitTimeout = time.Second
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	waitFor(t, "the pause read", func() bool { return c.Stats().Control.LanesPaused == 1 }, func() string { return fmt.Sprintf("%+v", c.Stats().Control) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := handledOf(rec, "chat-0002"); n != 0 {
		t.Fatalf("the paused session was handled %d times", n)
	}
}

// TestWatermarkAgePaused: a partition held by a paused session (no
// parking) for over a second reports a WatermarkAge of over a second (the
// status page's "waiting since", Health's "full ... since", the
// watermark-age metric), while its stall clock stays below StallTimeout.
// (Found by the second review: the mend that restarted the stall clock
// restarted the watermark's age too.)
func TestWatermarkAgePaused(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	const paused = "chat-0000"
	pauseBefore(t, e, "g-rev-age", "chats", paused)
	e.produce("chats", sessionNames(2), 2)
	rec := newRecorder(4, nil)
	cfg := e.config("g-rev-age", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.StallTimeout = 400 * time.Millisecond
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	defer stop()
	waitFor(t, "the other session handled", func() bool { return len(rec.snapshot()) == 2 }, func() string { return "" })
	var p PartitionStats
	waitFor(t, "the watermark held by the paused session for over a second, not stalled", func() bool {
		p = c.Stats().Partitions[0]
		return p.WatermarkAge > time.Second && p.HeldWaiting == "paused" && !p.Stalled
	}, func() string { return fmt.Sprintf("%+v", p) })
	if p.StalledFor >= cfg.StallTimeout {
		t.Fatalf("stall clock %v while paused; StallTimeout %v", p.StalledFor, cfg.StallTimeout)
	}
}

// TestCrossTopicResumed: session chat-0000 is paused in topic chats (no
// parking, SkipStalled on); its lane also holds its record of topic other,
// which is not paused, queued behind the paused head. After a pause of
// several StallTimeouts and a resume, no record is dead-lettered as
// stalled. (Found by the second review: the other partition's stall clock
// counted the pause, and its record was skipped when the lane woke.)
func TestCrossTopicResumed(t *testing.T) {
	e := newEnv(t, 1, "chats", "other", "dlq")
	const paused = "chat-0000"
	pauseBefore(t, e, "g-rev-x", "chats", paused)
	e.produce("chats", []string{paused}, 1)
	rec := newRecorder(2, func(_ context.Context, m *Message) error {
		if m.Record.Topic == "chats" {
			time.Sleep(300 * time.Millisecond) // under StallTimeout
		}
		return nil
	})
	cfg := e.config("g-rev-x", "chats", "other")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.StallTimeout, cfg.SkipStalled = 400*time.Millisecond, true
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the chats record asleep", func() bool { return c.Stats().Control.LanesPaused == 1 }, func() string { return fmt.Sprintf("%+v", c.Stats().Control) })
	cl := e.client()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "other", Key: []byte(paused), Value: []byte(paused + "|0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other topic's record held behind the paused head for three StallTimeouts", func() bool {
		for _, p := range c.Stats().Partitions {
			if p.Topic == "other" && p.HeldWaiting == "paused" && p.WatermarkAge > 3*cfg.StallTimeout {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })
	if _, err := c.ResumeSession(ctx, "chats", paused); err != nil {
		t.Fatal(err)
	}
	rec.wait(t) // both handled: neither skipped as stalled first
	st := c.Stats()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st.DeadLettered != 0 {
		t.Fatalf("after the resume: %d dead-lettered (%v), calls %+v", st.DeadLettered, st.DeadLetteredByReason, rec.snapshot())
	}
}

// TestHealthFullBehindPaused: without parking, a paused session's first
// record holds its partition; once the partition holds MaxBufferedRecords
// behind it, Health says so at once (its other sessions wait: never in
// silence), and the reason clears when the session is resumed.
func TestHealthFullBehindPaused(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	const paused = "chat-0000"
	pauseBefore(t, e, "g-full", "chats", paused)
	e.produce("chats", sessionNames(10), 10)
	rec := newRecorder(100, nil)
	cfg := e.config("g-full", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.MaxBufferedRecords = 16
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	full := func(r string) bool { return strings.Contains(r, "full (MaxBufferedRecords) behind paused session") }
	waitFor(t, "Health naming the partition full behind the paused session", func() bool {
		return slices.ContainsFunc(c.Health().Reasons, full)
	}, func() string { return fmt.Sprint(c.Health().Reasons) })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.ResumeSession(ctx, "chats", paused); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	waitFor(t, "the reason cleared", func() bool { return !slices.ContainsFunc(c.Health().Reasons, full) },
		func() string { return fmt.Sprint(c.Health().Reasons) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
