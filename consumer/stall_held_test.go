package consumer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// TestStallNotCountedWhileHeld: the stall watch does not count the time
// this member's work is held as a whole (a silence hold, an open
// breaker). A record holds its partition for 4 s of a 5 s StallTimeout,
// then a hold lasts 16 s: nothing is stalled during the hold, nor at the
// instant it ends, nor half a second later; the stall is reported once
// 1 s more has passed after it (the clock paused, not reset: a reset would
// report it 5 s after the hold). Driven by the stall check itself, with
// the times it is given.
func TestStallNotCountedWhileHeld(t *testing.T) {
	const timeout = 5 * time.Second
	for _, kind := range []string{"silence hold", "breaker open"} {
		t.Run(kind, func(t *testing.T) {
			c := unstarted(t, func(cfg *Config) {
				cfg.StallTimeout = timeout
				cfg.Breaker = BreakerPolicy{Enabled: true, Window: time.Hour, MinCalls: 1, FailureRatio: 1, ProbeInterval: time.Millisecond}
			})
			t0 := time.Now()
			now := t0
			c.member.clock = func() time.Time { return now }
			p := c.own.assign(map[string][]int32{"chats": {0}}, 1<<20, nil)[0]
			admitOffsets(p, 0)
			at := func(d time.Duration) { now = t0.Add(d) }
			hold := func(on bool) {
				switch {
				case kind == "breaker open" && on:
					if tr, _ := c.brk.Report(now, 0, breaker.Failure); tr != breaker.BecameOpen {
						t.Fatalf("breaker: %v, want it opened", tr)
					}
				case kind == "breaker open":
					a := c.brk.Allow(now)
					if tr, _ := c.brk.Report(now, a.Probe, breaker.Success); !a.OK || tr != breaker.BecameClosed {
						t.Fatalf("breaker: allowed %v, %v; want a probe that closes it", a.OK, tr)
					}
				case on:
					c.member.mu.Lock()
					c.member.phase, c.member.sentAt = phaseInSession, now.Add(-time.Hour)
					c.member.mu.Unlock()
					c.member.checkSilence(now, func() {})
					if c.member.gate() == nil {
						t.Fatal("no silence hold began")
					}
				default:
					c.member.endHold()
				}
			}
			check := func(d time.Duration, wantStalls int64) {
				t.Helper()
				at(d)
				c.checkStalls(context.Background(), now)
				ps := p.stats(now)
				if n := c.stats.stalls.Load(); n != wantStalls || ps.Stalled != (wantStalls > 0) {
					t.Fatalf("at %v: %d stalls, Stalled %v; want %d", d, n, ps.Stalled, wantStalls)
				}
			}
			check(0, 0)
			check(4*time.Second, 0)
			hold(true)
			check(10*time.Second, 0) // held: 4 s counted
			check(20*time.Second, 0)
			hold(false)
			check(20*time.Second, 0) // the instant the hold ends
			check(20*time.Second+500*time.Millisecond, 0)
			check(21*time.Second, 1) // 4 s before the hold, 1 s after it
		})
	}
}

// TestSilenceHoldIsNotAStall: a KIP-848 member cut off from its
// coordinator holds its work; the attempt it cut waits, and the time it
// waits is not stalled time. With SkipStalled and a StallTimeout shorter
// than the hold, nothing is dead-lettered as stalled (the next owner
// would handle the record too) and no stall is reported; Stats and Health
// name the partition held, by offset 0 of session "a", not stalled. Once
// the coordinator answers again the record is handled, once. (The stall
// clock is the same under the classic protocol: TestStallNotCountedWhileHeld.)
func TestSilenceHoldIsNotAStall(t *testing.T) {
	const sessionTimeout = 3 * time.Second // the hold begins 2.4 s after the last heartbeat answered was sent
	const stallTimeout = 6 * time.Second   // well past the time before the hold
	e := newGroupEnvTimeout(t, 1, sessionTimeout)
	hb := e.heartbeatGate()
	var calls atomic.Int32
	started, handled := make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		switch calls.Add(1) {
		case 1:
			close(started)
			<-ctx.Done() // honours its context: the hold cuts it
			return ctx.Err()
		case 2:
			close(handled)
		}
		return nil
	})
	cfg := e.groupConfig("g-hold-stall", []kgo.Opt{kgo.ServerSideBalancer()})
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(sessionTimeout), kgo.RequestTimeoutOverhead(2*testTimeout))
	cfg.HandlerTimeout = 2 * testTimeout
	cfg.StallTimeout, cfg.SkipStalled = stallTimeout, true
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produceValues("chats", "a|0")
	<-started
	hb.mute(func(string) bool { return true })
	eventually(t, "the hold", func() bool { return c.Stats().SilenceHolds == 1 })
	// Held for StallTimeout and two stall checks more: a stall counted
	// from the fetch would have been reported, and skipped, by now.
	waitFor(t, "the watermark held past StallTimeout", func() bool {
		st := c.Stats()
		return st.Stalls > 0 || st.DeadLettered > 0 || len(st.Partitions) != 1 ||
			st.Partitions[0].WatermarkAge >= stallTimeout+2*time.Second
	}, func() string { return strings.Join(c.Health().Reasons, "; ") })
	st := c.Stats()
	if st.Stalls != 0 || st.DeadLettered != 0 {
		t.Fatalf("during the hold: %d stalls, %d dead-lettered %v; a hold is not a stall", st.Stalls, st.DeadLettered, st.DeadLetteredByReason)
	}
	ps := st.Partitions[0]
	if ps.Stalled || ps.HeldAt != 0 || ps.HeldBySession != "a" {
		t.Fatalf("during the hold: stalled %v, held at %d by %q; want not stalled, offset 0, session a", ps.Stalled, ps.HeldAt, ps.HeldBySession)
	}
	checkHeldStats(t, st, "silence hold", stallTimeout)
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
	if st := c.Stats(); st.Stalls != 0 || st.DeadLettered != 0 {
		t.Fatalf("after the hold: %d stalls, %d dead-lettered", st.Stalls, st.DeadLettered)
	}
}

// TestBreakerOpenIsNotAStall: while the breaker is open the record holding
// the partition waits for it; that time is not stalled time. With
// SkipStalled and the breaker open for longer than StallTimeout, no stall
// is reported and nothing is skipped; Stats and Health name the partition
// held by offset 0 of session "a", not stalled; once a probe succeeds the
// record is done and nothing was dead-lettered.
func TestBreakerOpenIsNotAStall(t *testing.T) {
	const stallTimeout = 2 * time.Second // well past the failures that open the breaker
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0")
	var down atomic.Bool
	down.Store(true)
	cfg := e.config("g-breaker-stall", "chats")
	cfg.Retry.Forever = true
	cfg.StallTimeout, cfg.SkipStalled = stallTimeout, true
	cfg.Breaker = BreakerPolicy{Enabled: true, Window: time.Minute, MinCalls: 3, FailureRatio: 0.5, ProbeInterval: 20 * time.Millisecond}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		if down.Load() {
			return errDatabaseDown
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the breaker open", func() bool { return c.Stats().Breaker.Open })
	waitFor(t, "the breaker open past StallTimeout", func() bool {
		st := c.Stats()
		return st.Stalls > 0 || st.DeadLettered > 0 || !st.Breaker.Open ||
			time.Since(st.Breaker.OpenedAt) >= stallTimeout+2*time.Second
	}, func() string { return strings.Join(c.Health().Reasons, "; ") })
	st := c.Stats()
	if st.Stalls != 0 || st.DeadLettered != 0 || !st.Breaker.Open {
		t.Fatalf("while open: %d stalls, %d dead-lettered, breaker %+v; an open breaker is not a stall", st.Stalls, st.DeadLettered, st.Breaker)
	}
	ps := st.Partitions[0]
	if ps.Stalled || ps.HeldAt != 0 || ps.HeldBySession != "a" {
		t.Fatalf("while open: stalled %v, held at %d by %q; want not stalled, offset 0, session a", ps.Stalled, ps.HeldAt, ps.HeldBySession)
	}
	checkHeldStats(t, st, "breaker open", stallTimeout)
	checkHeldReasons(t, c, "breaker open")
	down.Store(false)
	eventually(t, "a|0 done", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Watermark == 1
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := c.Stats(); st.Stalls != 0 || st.DeadLettered != 0 || st.Processed != 1 {
		t.Fatalf("after the outage: %d stalls, %d dead-lettered, %d processed", st.Stalls, st.DeadLettered, st.Processed)
	}
}

// TestHeldBySessionWhileWaiting: the session and offset of the record
// holding a partition are named while that record waits (no attempt
// running): between retries, in a failing dead-letter write, in a failing
// park write. Stats and Health's stalled reason both name them.
func TestHeldBySessionWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		topics []string
		edit   func(e *env, cfg *Config)
		fail   func(e *env) func() // returns what the handler calls at its first failure
		err    error
		waits  func(st Stats) bool // the record is waiting where the case says
	}{
		{"retry wait", []string{"chats", "dlq"},
			func(_ *env, cfg *Config) {
				cfg.Retry = RetryPolicy{InitialInterval: time.Hour, MaxInterval: time.Hour, Jitter: -1, MaxElapsed: 2 * time.Hour}
			},
			nil, errDatabaseDown, func(st Stats) bool { return st.Retries >= 1 }},
		{"dead-letter write", []string{"chats", "dlq"}, nil,
			func(e *env) func() {
				refuse, _ := e.refuseWrites("dlq")
				refuse.Store(true)
				return func() {}
			},
			Permanent(errDatabaseDown), func(st Stats) bool { return st.DeadLetterFailures >= 1 }},
		{"park write", []string{"chats", "chats.park", "dlq"},
			func(_ *env, cfg *Config) { cfg.Park = ParkPolicy{Enabled: true, Delay: time.Minute} },
			func(e *env) func() {
				refuse, _ := e.refuseWrites("chats.park")
				return func() { refuse.Store(true) } // after the rebuild: its fence was written
			},
			Park(errDatabaseDown), func(st Stats) bool { return len(st.Partitions) == 1 && st.Partitions[0].Park.WriteError != "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, tc.topics...)
			e.produceValues("chats", "b|0", "a|0", "b|1") // a|0 at offset 1
			atFailure := func() {}
			if tc.fail != nil {
				atFailure = tc.fail(e)
			}
			var once sync.Once
			cfg := e.config("g-held-by-"+strings.ReplaceAll(tc.name, " ", "-"), "chats")
			cfg.StallTimeout = 100 * time.Millisecond
			if tc.edit != nil {
				tc.edit(e, &cfg)
			}
			c, err := New(cfg, HandlerFunc(func(_ context.Context, m *Message) error {
				if m.SessionID != "a" {
					return nil
				}
				once.Do(atFailure)
				return tc.err
			}))
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)
			eventually(t, "a|0 waiting, b done, the partition stalled", func() bool {
				st := c.Stats()
				return tc.waits(st) && len(st.Partitions) == 1 && st.Partitions[0].Stalled && st.Partitions[0].Pending == 2
			})
			ps := c.Stats().Partitions[0]
			if ps.HeldAt != 1 || ps.HeldBySession != "a" {
				t.Fatalf("held at %d by %q; want offset 1, session a", ps.HeldAt, ps.HeldBySession)
			}
			if r := strings.Join(c.Health().Reasons, "\n"); !strings.Contains(r, `chats/0 stalled since`) ||
				!strings.Contains(r, `held by offset 1, session "a"`) {
				t.Fatalf("health reasons:\n%s\nwant chats/0 stalled, held by offset 1, session a", r)
			}
		})
	}
}
