package consumer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controlTarget is the control target of group on e.
func controlTarget(e *env, group string) ControlTarget {
	return ControlTarget{Brokers: e.addrs, Group: group, By: "test"}
}

// pauseBefore pauses session of topic for group before any member runs.
func pauseBefore(t *testing.T, e *env, group, topic, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := PauseSession(ctx, controlTarget(e, group), topic, session, "moderation")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Paused || s.By != "test" || s.Reason != "moderation" {
		t.Fatalf("PauseSession returned %+v", s)
	}
}

// handledOf counts the calls rec saw for session.
func handledOf(rec *recorder, session string) int {
	n := 0
	for _, c := range rec.snapshot() {
		if c.session == session {
			n++
		}
	}
	return n
}

// TestPauseSession: a session paused before the members start is not
// handled, on a member and on the next one after a restart, while the 19
// other sessions of its partition are; its lane waits without a worker and
// the stall watch (SkipStalled, a 100 ms StallTimeout) neither reports nor
// skips it. Resumed, its records run, in order. Without the gate, the
// paused session is handled at once (TestPauseSession fails).
func TestPauseSession(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(20)
	const paused = "chat-0003"
	pauseBefore(t, e, "g-pause", "chats", paused)
	e.produce("chats", sessions, 5)
	rec := newRecorder(100, nil)
	cfg := e.config("g-pause", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond, PausedHealthAge: time.Millisecond}
	cfg.StallTimeout, cfg.SkipStalled = 100*time.Millisecond, true
	run := func() (*Consumer, func() error) {
		c, err := New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		return c, start(t, c)
	}
	for round := range 2 { // a restart keeps the pause
		c, stop := run()
		waitFor(t, "the 19 other sessions handled, the paused one waiting", func() bool {
			st := c.Stats()
			return handledOf(rec, paused) == 0 && len(rec.snapshot()) >= 95 && st.Control.LanesPaused == 1 &&
				len(st.Partitions) == 1 && st.Partitions[0].HeldWaiting == "paused"
		}, func() string { return fmt.Sprintf("round %d: %d calls, %+v", round, len(rec.snapshot()), c.Stats()) })
		st := c.Stats()
		if p := st.Partitions[0]; p.Stalled || st.Stalls != 0 || st.DeadLettered != 0 || p.HeldBySession != paused {
			t.Fatalf("round %d: partition %+v, %d stalls, %d dead-lettered: a paused session is no stall", round, p, st.Stalls, st.DeadLettered)
		}
		if got := st.Control.Sessions; len(got) != 1 || got[0].Session != paused || !got[0].Paused || got[0].Waiting != 1 {
			t.Fatalf("round %d: Stats.Control.Sessions %+v; want %s paused, one lane waiting", round, got, paused)
		}
		if handledOf(rec, paused) != 0 {
			t.Fatalf("round %d: the paused session was handled", round)
		}
		h := c.Health()
		if !slices.ContainsFunc(h.Notices, func(n string) bool { return strings.Contains(n, "paused longer than Control.PausedHealthAge") }) ||
			slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.Contains(r, "paused") }) {
			t.Fatalf("round %d: Health %+v: a long pause is a notice, not a reason (an operator's decision does not make members not ready)", round, h)
		}
		if round == 1 {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			if _, err := c.ResumeSession(ctx, "chats", paused); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ResumeSession(ctx, "chats", paused); !errors.Is(err, ErrNotPaused) {
				t.Fatalf("a second resume: %v; want ErrNotPaused", err)
			}
			cancel()
			rec.wait(t)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 5)
}

// TestPauseParked: with parking on, a paused session's records are parked
// at once (no attempt), so its partition's watermark moves past them and
// the others commit; its parked head is not retried while it is paused.
// Resumed, its parked records run in order.
func TestPauseParked(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	sessions := sessionNames(10)
	const paused = "chat-0007"
	pauseBefore(t, e, "g-pause-park", "chats", paused)
	e.produce("chats", sessions, 4)
	rec := newRecorder(40, nil)
	cfg := e.config("g-pause-park", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the others handled and committed past the paused session's records", func() bool {
		st := c.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].Committed == 40 && st.Control.PausedParked == 1 && len(rec.snapshot()) == 36
	}, func() string { return fmt.Sprintf("%d calls, %+v", len(rec.snapshot()), c.Stats()) })
	if n := handledOf(rec, paused); n != 0 {
		t.Fatalf("the paused session was handled %d times", n)
	}
	if p := c.Stats().Partitions[0].Park; p.Sessions != 1 || p.Records != 4 {
		t.Fatalf("park stats %+v; want one session with 4 records", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := ResumeSession(ctx, controlTarget(e, "g-pause-park"), "chats", paused); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 4)
	for _, c := range rec.snapshot() {
		if c.session == paused && c.attempt != 1 {
			t.Fatalf("paused record %d ran as attempt %d; a pause spends no attempt", c.seq, c.attempt)
		}
	}
}

// timedRecorder keeps when each session's calls began.
type timedRecorder struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (r *timedRecorder) note(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string][]time.Time{}
	}
	r.at[session] = append(r.at[session], time.Now())
}

// checkRate fails when the calls at ats ever ran faster than rate per
// second in bursts of burst, beyond the bunching a lane woken late makes:
// for every pair i < j, j−i calls after the i-th took at least
// (j−i−burst−late+1)/rate.
func checkRate(t *testing.T, what string, ats []time.Time, rate float64, burst int) {
	t.Helper()
	const slack = 5 * time.Millisecond // the clock read after the gate let it go
	// A lane woken late starts its record late, and the records whose
	// tokens fell due meanwhile start right after it (docs/control.md):
	// calls may bunch by rate × the lateness, here up to lateBy on a busy
	// machine under -race. A limit not held at all runs far faster.
	const lateBy = 60 * time.Millisecond
	late := int(math.Ceil(rate * lateBy.Seconds()))
	for i := range ats {
		for j := i + burst + late; j < len(ats); j++ {
			least := time.Duration(float64(j-i-burst-late+1) / rate * float64(time.Second))
			if got := ats[j].Sub(ats[i]); got+slack < least {
				t.Fatalf("%s: calls %d to %d took %v; at %v/s in bursts of %d they take at least %v", what, i, j, got, rate, burst, least)
			}
		}
	}
}

// TestLimitSession: a session limited to 40 records a second (bursts of
// 2) by an operator never runs faster, measured by its calls' times,
// while the other sessions of its partition are not limited.
func TestLimitSession(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(5)
	const slow = "chat-0001"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := LimitSession(ctx, controlTarget(e, "g-limit"), "chats", slow, Limit{Rate: 40, Burst: 2}, "spam"); err != nil {
		t.Fatal(err)
	}
	e.produce("chats", sessions, 30)
	var tr timedRecorder
	rec := newRecorder(150, func(_ context.Context, m *Message) error {
		tr.note(string(m.Record.Key))
		return nil
	})
	cfg := e.config("g-limit", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 5*6)
	checkRate(t, slow, tr.at[slow], 40, 2)
	if s := c.Stats().Control.Sessions; len(s) != 1 || s[0].Rate != 40 || s[0].Burst != 2 || s[0].Reason != "spam" {
		t.Fatalf("Stats.Control.Sessions %+v", s)
	}
}

// TestThrottleResources: records map to two tenants; tenant "t0" has a
// concurrency limit of 2 and tenant "t1" a rate of 50 a second. A
// counter in the handler never sees more than 2 of t0's at once, and t1's
// calls never run faster than its rate.
func TestThrottleResources(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	sessions := sessionNames(20)
	e.produce("chats", sessions, 5)
	tenant := func(session string) string {
		var n int
		fmt.Sscanf(strings.TrimPrefix(session, "chat-"), "%d", &n)
		return fmt.Sprintf("t%d", n%2)
	}
	var mu sync.Mutex
	running, most := 0, 0
	var tr timedRecorder
	rec := newRecorder(100, func(_ context.Context, m *Message) error {
		switch tenant(m.SessionID) {
		case "t0":
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the tenant's database call
			mu.Lock()
			running--
			mu.Unlock()
		case "t1":
			tr.note("t1")
		}
		return nil
	})
	cfg := e.config("g-res", "chats")
	cfg.Throttle = ThrottlePolicy{
		Resource: func(r *kgo.Record) string { return tenant(string(r.Key)) },
		Limits:   map[string]Limit{"t0": {Concurrency: 2}, "t1": {Rate: 50, Burst: 1}},
	}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 5)
	if most > 2 || most < 1 {
		t.Fatalf("tenant t0 ran %d records at once; its limit is 2", most)
	}
	tr.mu.Lock()
	slices.SortFunc(tr.at["t1"], func(a, b time.Time) int { return a.Compare(b) })
	tr.mu.Unlock()
	checkRate(t, "tenant t1", tr.at["t1"], 50, 1)
}

// TestControlRefusesBadConfig: each bad field is named.
func TestControlRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"negative interval", func(c *Config) { c.Control = ControlPolicy{Enabled: true, Interval: -1} }, "Control.Interval"},
		{"fields without Enabled", func(c *Config) { c.Control = ControlPolicy{Topic: "x"} }, "Control"},
		{"negative session rate", func(c *Config) { c.Throttle.Session = Limit{Rate: -1} }, "Throttle.Session.Rate"},
		{"session concurrency", func(c *Config) { c.Throttle.Session = Limit{Concurrency: 2} }, "Throttle.Session.Concurrency"},
		{"limits without Resource", func(c *Config) { c.Throttle.Limits = map[string]Limit{"a": {Rate: 1}} }, "Throttle.Resource"},
		{"negative resource burst", func(c *Config) {
			c.Throttle.Resource = func(*kgo.Record) string { return "" }
			c.Throttle.Limits = map[string]Limit{"a": {Burst: -1}}
		}, `Throttle.Limits["a"].Burst`},
	} {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"}
		tc.edit(&cfg)
		_, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrConfig naming %s", tc.name, err, tc.want)
		}
	}
	ctx := context.Background()
	if _, err := PauseSession(ctx, ControlTarget{Brokers: []string{"127.0.0.1:1"}}, "t", "s", ""); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ControlTarget.Group") {
		t.Errorf("PauseSession without a group: %v", err)
	}
	if _, err := LimitSession(ctx, ControlTarget{Brokers: []string{"127.0.0.1:1"}, Group: "g"}, "t", "s", Limit{Rate: -2}, ""); !errors.Is(err, ErrConfig) {
		t.Errorf("LimitSession with a negative rate: %v", err)
	}
}

// TestCreateTopicsControl: CreateTopics makes the control topic (one
// partition, compacted) when Control is on, and CheckTopics names one
// that is neither.
func TestCreateTopicsControl(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	cfg := e.config("g-topics", "chats")
	cfg.Control = ControlPolicy{Enabled: true}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rs, err := CreateTopics(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rs, func(r TopicResult) bool { return r.Kind == TopicControl })
	if i < 0 || rs[i].Topic != DefaultControlTopic || rs[i].State != TopicCreated || rs[i].Partitions != 1 {
		t.Fatalf("CreateTopics: %+v; want the control topic %s created with 1 partition", rs, DefaultControlTopic)
	}
	if rs, err = CheckTopics(ctx, cfg); err != nil {
		t.Fatalf("CheckTopics after CreateTopics: %v (%+v)", err, rs)
	}
	cfg.Control.Topic = "chats" // two partitions, not compacted
	_, err = CheckTopics(ctx, cfg)
	if !errors.Is(err, ErrTopicUnfit) || !strings.Contains(err.Error(), "control topic chats") || !strings.Contains(err.Error(), "needs exactly 1") {
		t.Fatalf("CheckTopics with a 2-partition control topic: %v", err)
	}
}

// TestControlUnreadable: while the control topic cannot be read at
// start, the member handles no record (the pauses it holds must be known
// first) and Health says why; once it reads, the member goes on and the
// reason clears.
func TestControlUnreadable(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	pauseBefore(t, e, "g-unreadable", "chats", "chat-0001")
	e.produce("chats", sessionNames(3), 2)
	var broken atomic.Bool
	broken.Store(true)
	e.c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kreq.(*kmsg.ListOffsetsRequest)
		if !broken.Load() || len(req.Topics) != 1 || req.Topics[0].Topic != DefaultControlTopic {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = DefaultControlTopic
		for _, p := range req.Topics[0].Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	rec := newRecorder(4, nil)
	cfg := e.config("g-unreadable", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "Health naming the unreadable control topic", func() bool {
		return slices.ContainsFunc(c.Health().Reasons, func(r string) bool {
			return strings.Contains(r, "control topic lanes.control unreadable") && strings.Contains(r, "no record is handled")
		})
	}, func() string { return fmt.Sprint(c.Health().Reasons) })
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("%d records handled before the control topic was read", n)
	}
	broken.Store(false)
	rec.wait(t) // the four of the two sessions not paused
	waitFor(t, "the reason cleared", func() bool {
		return !slices.ContainsFunc(c.Health().Reasons, func(r string) bool { return strings.Contains(r, "control topic") })
	}, func() string { return fmt.Sprint(c.Health().Reasons) })
	if n := handledOf(rec, "chat-0001"); n != 0 {
		t.Fatalf("the paused session was handled %d times", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestControlOtherGroupAndRemade: another group's pause of the same
// session of the same topic does not pause it for this group; a control
// topic deleted while a session is paused keeps the pause (a broker that
// does not know the topic yet answers the same), and one made again is
// read from its start: its settings replace those read before.
func TestControlOtherGroupAndRemade(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	pauseBefore(t, e, "another-group", "chats", "chat-0000")
	pauseBefore(t, e, "g-remade", "chats", "chat-0001")
	e.produce("chats", sessionNames(3), 2)
	rec := newRecorder(6, nil)
	cfg := e.config("g-remade", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the sessions not paused for this group handled, the paused one waiting", func() bool {
		return len(rec.snapshot()) == 4 && c.Stats().Control.LanesPaused == 1
	}, func() string { return fmt.Sprintf("%d calls, %+v", len(rec.snapshot()), c.Stats().Control) })
	if handledOf(rec, "chat-0000") != 2 || handledOf(rec, "chat-0001") != 0 {
		t.Fatalf("calls %+v: chat-0000 is paused for another group only, chat-0001 for this one", rec.snapshot())
	}
	adm := kadm.NewClient(e.client())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, DefaultControlTopic); err != nil {
		t.Fatal(err)
	}
	// Gone, the topic takes no pause with it: a broker that does not know
	// it yet says the same.
	waitFor(t, "the control topic's absence seen", func() bool { return c.ctlLog.missing.Load() },
		func() string { return "not yet" })
	if s := c.Stats().Control.Sessions; len(s) != 1 || s[0].Session != "chat-0001" || handledOf(rec, "chat-0001") != 0 {
		t.Fatalf("settings after the control topic was deleted: %+v, chat-0001 handled %d times; want its pause kept", s, handledOf(rec, "chat-0001"))
	}
	pauseBefore(t, e, "g-remade", "chats", "chat-0002") // makes the topic again: it replaces what was read
	waitFor(t, "the pause in the topic made again read, the old one dropped", func() bool {
		s := c.Stats().Control.Sessions
		return len(s) == 1 && s[0].Session == "chat-0002" && s[0].Paused
	}, func() string { return fmt.Sprintf("%+v", c.Stats().Control) })
	rec.wait(t) // chat-0001 resumed with the old topic's settings: its records run
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
