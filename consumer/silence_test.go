package consumer

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupMember is the member ID of a group request (a classic heartbeat,
// join or sync; a KIP-848 heartbeat), "" for any other request.
func groupMember(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.HeartbeatRequest:
		return r.MemberID
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return r.MemberID
	case *kmsg.JoinGroupRequest:
		return r.MemberID
	case *kmsg.SyncGroupRequest:
		return r.MemberID
	}
	return ""
}

// heartbeatGate delays, under both protocols, the heartbeats of the
// members it mutes until it unmutes them: the coordinator then answers
// them as usual (the member may be gone by then). It records the member
// IDs seen in heartbeats. groupGate does the same for other group
// requests too.
type heartbeatGate struct {
	mu    sync.Mutex
	muted func(member string) bool // nil: none
	open  chan struct{}            // closed by unmute
	ids   map[string]bool
	// refuse, when not 0, is the error code the coordinator answers a
	// muted member's heartbeats with, at once, instead of delaying them:
	// a coordinator that answers but does not take the heartbeat (one
	// moving or loading the group), so the session still times out.
	refuse int16
}

func (e *env) heartbeatGate() *heartbeatGate {
	return e.groupGate(kmsg.Heartbeat, kmsg.ConsumerGroupHeartbeat)
}

// groupGate is a heartbeatGate over the requests of the given keys.
func (e *env) groupGate(keys ...kmsg.Key) *heartbeatGate {
	g := &heartbeatGate{ids: map[string]bool{}}
	for _, k := range keys {
		e.c.ControlKey(int16(k), func(req kmsg.Request) (kmsg.Response, error, bool) {
			e.c.KeepControl()
			open, refuse := g.held(groupMember(req))
			switch {
			case open != nil && refuse != 0:
				return refused(req, refuse), nil, true
			case open != nil:
				e.sleep(open)
			}
			return nil, nil, false
		})
	}
	e.t.Cleanup(g.unmute)
	return g
}

// held records id and returns the channel its heartbeat waits on, nil
// when it is not muted, and the error code to refuse it with instead.
func (g *heartbeatGate) held(id string) (chan struct{}, int16) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id != "" {
		g.ids[id] = true
	}
	if g.muted == nil || !g.muted(id) {
		return nil, 0
	}
	return g.open, g.refuse
}

// refused is the answer to a group request with the error code (a
// heartbeat's or a sync's; nil for other keys: not refused).
func refused(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := resp.(type) {
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	}
	return resp
}

func (g *heartbeatGate) mute(f func(member string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.muted, g.open = f, make(chan struct{})
}

func (g *heartbeatGate) unmute() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.muted != nil {
		g.muted = nil
		close(g.open)
	}
}

func (g *heartbeatGate) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for id := range g.ids {
		out = append(out, id)
	}
	return out
}

// streamRounds produces a round of one message per session every pace,
// numbered per session, keyed by session, until the returned func is
// called: it stops the rounds and returns how many were sent (every one
// acknowledged). The test's cleanup stops them too.
func (e *env) streamRounds(sessions []string, pace time.Duration) (finish func() int) {
	cl := e.client()
	stop, done := make(chan struct{}), make(chan int, 1)
	go func() {
		rounds := 0
		defer func() { done <- rounds }()
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for {
			recs := make([]*kgo.Record, 0, len(sessions))
			for _, s := range sessions {
				recs = append(recs, &kgo.Record{Topic: "chats", Key: []byte(s), Value: []byte(s + "|" + strconv.Itoa(rounds))})
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				e.t.Errorf("produce round %d: %v", rounds, err)
				return
			}
			rounds++
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	var n int
	finish = func() int {
		once.Do(func() { close(stop); n = <-done })
		return n
	}
	e.t.Cleanup(func() { finish() })
	return finish
}

// TestSilentMemberHoldsWork: a member whose heartbeats go unanswered is
// counted gone by the coordinator after the session timeout and its
// partitions go to the other member at once, while it still has records
// fetched and could fetch more. It must hold its work before that: no two
// calls of a session ever overlap across the two members, and every
// message is handled. Under both group protocols; the handlers honour
// their context.
func TestSilentMemberHoldsWork(t *testing.T) {
	silentMemberHoldsWork(t, 0)
}

// TestRefusedHeartbeatsHoldWork: the same with the member's heartbeats
// answered at once, with COORDINATOR_NOT_AVAILABLE (as a coordinator
// answers while it moves or loads the group), instead of left unanswered.
// An answer that is an error did not keep the session going: the group
// still counts the member gone after the session timeout, so such
// answers must not count against the silence, nor end a hold.
func TestRefusedHeartbeatsHoldWork(t *testing.T) {
	silentMemberHoldsWork(t, kerr.CoordinatorNotAvailable.Code)
}

func silentMemberHoldsWork(t *testing.T, refuse int16) {
	for _, proto := range protocolsFor(t, "kip848") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnv(t, 4)
			hb := e.heartbeatGate()
			hb.refuse = refuse
			sessions := sessionNames(24)
			rec := newRecorder(1<<30, func(ctx context.Context, _ *Message) error {
				select { // simulated work that honours its context
				case <-time.After(5 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			group := "g-silent-" + proto.name
			cfg := e.groupConfig(group, proto.opts)
			var spans spanLog
			a, err := New(cfg, spans.wrap("a", rec))
			if err != nil {
				t.Fatal(err)
			}
			rounds := e.streamRounds(sessions, 5*time.Millisecond)
			stopA := start(t, a)
			eventually(t, "a to handle records", func() bool { return len(rec.snapshot()) > 50 })
			var id string
			eventually(t, "a heartbeat of a, alone in the group", func() bool {
				ids := hb.seen()
				if len(ids) > 1 {
					t.Fatalf("member IDs in heartbeats before b started: %v", ids)
				}
				id = strings.Join(ids, "")
				return id != ""
			})
			b, err := New(cfg, spans.wrap("b", rec))
			if err != nil {
				t.Fatal(err)
			}
			stopB := start(t, b)
			eventually(t, "both members to own partitions", func() bool {
				return len(a.Stats().Partitions) > 0 && len(b.Stats().Partitions) > 0
			})

			hb.mute(func(m string) bool { return m == id })
			eventually(t, "b to own every partition", func() bool { return len(b.Stats().Partitions) == 4 })
			// a, held, still lists the partitions it had: its rejoin is a
			// new assignment, not partitions listed.
			before := a.Stats().Rebalances
			hb.unmute()
			eventually(t, "a to rejoin", func() bool {
				st := a.Stats()
				return st.Rebalances > before && len(st.Partitions) > 0
			})
			n := rounds()
			waitHandled(t, rec, sessions, n)
			if err := stopA(); err != nil {
				t.Errorf("a: Run: %v", err)
			}
			if err := stopB(); err != nil {
				t.Errorf("b: Run: %v", err)
			}
			rec.mu.Lock()
			overlaps := rec.overlaps
			rec.mu.Unlock()
			if len(overlaps) > 0 {
				t.Fatalf("%d overlapping calls across the members, first: %v\n%s", len(overlaps), overlaps[:min(5, len(overlaps))], spans.overlaps(5))
			}
			st := a.Stats()
			// A classic heartbeat refused is retried within the
			// session timeout, and franz-go then ends the session
			// (lost) before a hold can be due: no overlap is what holds.
			if st.SilenceHolds == 0 && (refuse == 0 || proto.name != "classic") {
				t.Errorf("the silent member counted no hold: %+v", st)
			}
			if st.DeadLettered+b.Stats().DeadLettered != 0 {
				t.Errorf("dead-lettered %d + %d: a hold must spend no retry budget", st.DeadLettered, b.Stats().DeadLettered)
			}
			t.Logf("%d rounds of %d sessions; member a held its work %d time(s)", n, len(sessions), st.SilenceHolds)
		})
	}
}

// spanLog records every handler call with its member, to name both sides
// of an overlap.
type spanLog struct {
	mu    sync.Mutex
	spans []callSpan
}

type callSpan struct {
	member, session string
	seq             int
	partition       int32
	start, end      time.Time
}

func (l *spanLog) wrap(member string, h Handler) Handler {
	return HandlerFunc(func(ctx context.Context, m *Message) error {
		s, seq := parseValue(m.Record.Value)
		cs := callSpan{member: member, session: s, seq: seq, partition: m.Record.Partition, start: time.Now()}
		err := h.Handle(ctx, m)
		cs.end = time.Now()
		l.mu.Lock()
		l.spans = append(l.spans, cs)
		l.mu.Unlock()
		return err
	})
}

// overlaps describes up to n pairs of calls of one session that overlap.
func (l *spanLog) overlaps(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	last := map[string]callSpan{}
	ss := append([]callSpan(nil), l.spans...)
	sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
	for _, c := range ss {
		if p, ok := last[c.session]; ok && c.start.Before(p.end) && len(out) < n {
			out = append(out, fmt.Sprintf("%s: %s seq %d (p%d) %s..%s overlaps %s seq %d (p%d) %s..%s", c.session,
				p.member, p.seq, p.partition, p.start.Format("05.000000"), p.end.Format("05.000000"),
				c.member, c.seq, c.partition, c.start.Format("05.000000"), c.end.Format("05.000000")))
		}
		if p, ok := last[c.session]; !ok || c.end.After(p.end) {
			last[c.session] = c
		}
	}
	return strings.Join(out, "\n")
}

// waitHandled waits until every session's messages 0..rounds-1 succeeded
// at least once.
func waitHandled(t *testing.T, rec *recorder, sessions []string, rounds int) {
	t.Helper()
	want := len(sessions) * rounds
	var got int
	eventually(t, fmt.Sprintf("%d messages handled", want), func() bool {
		ok := map[string]bool{}
		for _, c := range rec.snapshot() {
			if c.err == nil && c.seq < rounds {
				ok[c.session+"|"+strconv.Itoa(c.seq)] = true
			}
		}
		got = len(ok)
		return got == want
	})
}

// TestSilenceHoldCutsAndResumes: when no heartbeat has been answered for
// four fifths of the session timeout, the running attempt's context is
// cancelled, no attempt starts until a heartbeat is answered, readiness
// says so, and the cut attempt spends no retry budget (MaxAttempts 1 would
// dead-letter it). Under both group protocols.
func TestSilenceHoldCutsAndResumes(t *testing.T) {
	const sessionTimeout = 4 * time.Second // the hold at 3.2 s leaves the test 0.8 s before the group counts it gone
	for _, proto := range protocolsFor(t, "classic") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnvTimeout(t, 1, sessionTimeout)
			hb := e.heartbeatGate()
			var mu sync.Mutex
			var starts []time.Time
			started, cut := make(chan struct{}), make(chan time.Time, 1)
			h := HandlerFunc(func(ctx context.Context, m *Message) error {
				mu.Lock()
				starts = append(starts, time.Now())
				first := len(starts) == 1
				mu.Unlock()
				if !first {
					return nil
				}
				close(started)
				<-ctx.Done() // honours its context; only the hold ends it
				cut <- time.Now()
				return ctx.Err()
			})
			cfg := e.groupConfig("g-hold-"+proto.name, proto.opts)
			// A classic heartbeat left unanswered times out after the
			// request overhead and ends the session: longer here, so
			// that the hold comes first.
			cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(sessionTimeout), kgo.RequestTimeoutOverhead(2*sessionTimeout))
			cfg.Retry.MaxAttempts = 1
			cfg.HandlerTimeout = time.Minute
			c, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			e.produceValues("chats", "a|0")
			<-started
			hb.mute(func(string) bool { return true })
			select {
			case <-cut:
			case <-time.After(testTimeout):
				t.Fatal("the running attempt was never cancelled while no heartbeat was answered")
			}
			if r := strings.Join(c.Health().Reasons, "; "); !strings.Contains(r, "holds its work") && !strings.Contains(r, "is held") {
				t.Errorf("readiness while held: %q", r)
			}
			if n := c.Stats().SilenceHolds; n != 1 {
				t.Errorf("SilenceHolds = %d, want 1", n)
			}
			resumed := time.Now()
			hb.unmute()
			eventually(t, "the record handled after the hold", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(starts) >= 2
			})
			mu.Lock()
			second := starts[1]
			mu.Unlock()
			if second.Before(resumed) {
				t.Errorf("an attempt started at %v, while the work was held (heartbeats answered again from %v)", second, resumed)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st := c.Stats(); st.DeadLettered != 0 {
				t.Fatalf("the attempt cut by the hold was counted: %d dead-lettered", st.DeadLettered)
			}
			if r := strings.Join(c.Health().Reasons, "; "); strings.Contains(r, "holds its work") {
				t.Errorf("the hold still named after it ended: %q", r)
			}
		})
	}
}

// newGroupEnvTimeout is newGroupEnv with another KIP-848 session timeout
// (the classic one is the client's kgo.SessionTimeout).
func newGroupEnvTimeout(t *testing.T, partitions int32, sessionTimeout time.Duration) *env {
	return newGroupEnv(t, partitions, kfake.BrokerConfigs(map[string]string{
		"group.consumer.session.timeout.ms": strconv.Itoa(int(sessionTimeout.Milliseconds())),
	}))
}
