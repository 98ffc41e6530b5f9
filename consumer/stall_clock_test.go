package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/hold"
)

// checkHeldStats checks Stats taken while this member's work is held
// (kind) after its only partition's watermark waited past timeout: the
// hold named, the stall clock paused below the timeout.
func checkHeldStats(t *testing.T, st Stats, kind string, timeout time.Duration) {
	t.Helper()
	ps := st.Partitions[0]
	if st.WorkHeld != kind || ps.WatermarkAge < timeout || ps.StalledFor >= timeout {
		t.Fatalf("WorkHeld %q (want %q), watermark age %v, stall clock %v; want the clock paused below %v",
			st.WorkHeld, kind, ps.WatermarkAge, ps.StalledFor, timeout)
	}
}

// TestStallClockStats: what Stats shows of the stall clock: paused during
// a hold (WatermarkAge goes on), not stalled while held although the clock
// had reached the timeout before the hold, stalled again after it; the
// clock starts again when the watermark moves.
func TestStallClockStats(t *testing.T) {
	const timeout = 5 * time.Second
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 1<<20, nil)
	seqs := admitOffsets(p, 0, 1)
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var h hold.Clock
	check := func(s float64, wantStalled bool, counted, age time.Duration) {
		t.Helper()
		got := p.stallCheck(at(s), timeout, h.Read(at(s)))
		ps := p.stats(at(s))
		if got.stalled != wantStalled || ps.Stalled != wantStalled || ps.StalledFor != counted || ps.WatermarkAge != age {
			t.Fatalf("at %vs: stalled %v (stats %v), clock %v, age %v; want %v, %v, %v",
				s, got.stalled, ps.Stalled, ps.StalledFor, ps.WatermarkAge, wantStalled, counted, age)
		}
	}
	check(0, false, 0, 0)
	check(6, true, 6*time.Second, 6*time.Second)
	h.Set(hold.Breaker, true, at(7))
	check(9, false, 7*time.Second, 9*time.Second) // held: a hold is not a stall
	if ps := p.stats(at(12)); ps.StalledFor != 7*time.Second {
		t.Fatalf("between checks, held: clock %v, want it paused at 7s", ps.StalledFor)
	}
	h.Set(hold.Breaker, false, at(12))
	check(13, true, 8*time.Second, 13*time.Second) // stalled before the hold: stalled again after it
	if ps := p.stats(at(14)); ps.StalledFor != 9*time.Second {
		t.Fatalf("between checks: clock %v, want 9s", ps.StalledFor)
	}
	p.finish(seqs[0], true) // the watermark moves to offset 1
	check(15, false, 0, 0)
	check(19, false, 4*time.Second, 4*time.Second)
	p.finish(seqs[1], true)
	check(20, false, 0, 0) // nothing pending
}

// checkHeldReasons checks Health while this member's work is held (kind)
// after chats/0's watermark waited past StallTimeout for offset 0 of
// session "a": not ready, chats/0 named held, not stalled, with the record.
func checkHeldReasons(t *testing.T, c *Consumer, kind string) {
	t.Helper()
	h := c.Health()
	r := strings.Join(h.Reasons, "\n")
	if h.Ready || !strings.Contains(r, "chats/0 held, not stalled") || !strings.Contains(r, `offset 0, session "a"`) ||
		!strings.Contains(r, "("+kind+")") || strings.Contains(r, "chats/0 stalled") {
		t.Fatalf("health reasons:\n%s\nwant chats/0 held, not stalled, by offset 0 of session a, (%s)", r, kind)
	}
}

// TestHeldBySessionBeforeFirstAttempt: a record fetched during a silence
// hold is taken by its lane and waits for the hold before its first
// attempt; Stats and Health's held reason name it. Classic protocol
// (TestSilenceHoldIsNotAStall is KIP-848's).
func TestHeldBySessionBeforeFirstAttempt(t *testing.T) {
	const sessionTimeout = 3 * time.Second
	e := newGroupEnvTimeout(t, 1, sessionTimeout)
	hb := e.heartbeatGate()
	cfg := e.groupConfig("g-held-first", nil)
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(sessionTimeout), kgo.RequestTimeoutOverhead(2*testTimeout))
	cfg.StallTimeout = 100 * time.Millisecond
	handled := make(chan struct{}, 1)
	var c *Consumer
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		if c.member.gate() != nil {
			t.Error("a|0 attempted during the hold")
		}
		select {
		case handled <- struct{}{}:
		default:
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "chats/0 assigned", func() bool { return len(c.Stats().Partitions) == 1 })
	hb.mute(func(string) bool { return true })
	eventually(t, "the hold", func() bool { return c.Stats().SilenceHolds == 1 })
	e.produceValues("chats", "a|0")
	var ps PartitionStats
	eventually(t, "a|0 taken by its lane, waiting past StallTimeout", func() bool {
		st := c.Stats()
		if len(st.Partitions) != 1 {
			return false
		}
		ps = st.Partitions[0]
		return ps.InFlight == 1 && ps.WatermarkAge >= cfg.StallTimeout
	})
	if ps.HeldAt != 0 || ps.HeldBySession != "a" {
		t.Fatalf("chats/0 held at %d by %q; want offset 0, session a", ps.HeldAt, ps.HeldBySession)
	}
	checkHeldReasons(t, c, "silence hold")
	hb.unmute()
	select {
	case <-handled:
	case <-time.After(testTimeout):
		t.Fatal("a|0 never handled after the hold")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
