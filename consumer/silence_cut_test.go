package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/groupwire"
)

// TestSilenceHoldDuringShutdown: the shutdown lets running handlers finish
// for up to ShutdownTimeout while the member still owns its partitions;
// the coordinator going silent meanwhile must still cut them before the
// group can count the member gone. Under both group protocols.
func TestSilenceHoldDuringShutdown(t *testing.T) {
	const sessionTimeout = 3 * time.Second
	for _, proto := range protocolsFor(t, "kip848") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnvTimeout(t, 1, sessionTimeout)
			hb := e.heartbeatGate()
			started, cut := make(chan struct{}), make(chan struct{})
			var once sync.Once
			h := HandlerFunc(func(ctx context.Context, m *Message) error {
				first := false
				once.Do(func() { first = true })
				if !first {
					return nil
				}
				close(started)
				<-ctx.Done() // honours its context; only the hold ends it before ShutdownTimeout
				close(cut)
				return ctx.Err()
			})
			cfg := e.groupConfig("g-hold-stop-"+proto.name, proto.opts)
			// A heartbeat left unanswered must not end the session (a
			// classic one would, after the request overhead): the hold
			// alone is to cut the handler.
			cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(sessionTimeout), kgo.RequestTimeoutOverhead(2*testTimeout))
			cfg.HandlerTimeout = 4 * testTimeout
			cfg.ShutdownTimeout = 2 * testTimeout
			cfg.LeaveTimeout = time.Second
			c, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			e.produceValues("chats", "a|0")
			<-started
			hb.mute(func(string) bool { return true })
			stopped := make(chan error, 1)
			go func() { stopped <- stop() }()
			select {
			case <-cut:
			case <-time.After(testTimeout):
				t.Fatal("the handler running at shutdown was never cut while no heartbeat was answered")
			}
			if err := <-stopped; err != nil {
				t.Logf("Run: %v", err)
			}
			if n := c.Stats().SilenceHolds; n != 1 {
				t.Errorf("SilenceHolds = %d, want 1", n)
			}
			if r := strings.Join(c.Health().Reasons, "; "); strings.Contains(r, "holds its work") {
				t.Errorf("the hold still named after Run returned: %q", r)
			}
		})
	}
}

// TestSilenceHoldCutsBatchAfterProgress: a batch call that finished its
// first message and was then cut by a silence hold spends no retry budget
// of the next message either: with MaxAttempts 2, that message, failing
// once after the hold, is tried again rather than dead-lettered. Classic
// protocol (the hold is the same under both).
func TestSilenceHoldCutsBatchAfterProgress(t *testing.T) {
	const sessionTimeout = 4 * time.Second
	e := newGroupEnvTimeout(t, 1, sessionTimeout)
	hb := e.heartbeatGate()
	e.produceValues("chats", "a|0", "a|1")
	var mu sync.Mutex
	var calls [][]string
	started := make(chan struct{})
	h := BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
		var vs []string
		for _, m := range ms {
			vs = append(vs, string(m.Record.Value))
		}
		mu.Lock()
		calls = append(calls, vs)
		n := len(calls)
		mu.Unlock()
		switch n {
		case 1: // a|0 done, then a|1 runs until the hold cuts it
			if len(ms) != 2 {
				t.Errorf("first batch %v, want both messages", vs)
				return nil
			}
			close(started)
			<-ctx.Done()
			return &BatchError{Done: 1, Err: ctx.Err()}
		case 2: // a|1 fails once, for itself
			return errors.New("injected: a failure of its own")
		}
		return nil
	})
	cfg := e.groupConfig("g-hold-batch", nil)
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(sessionTimeout), kgo.RequestTimeoutOverhead(2*sessionTimeout))
	cfg.Retry.MaxAttempts = 2
	cfg.HandlerTimeout = time.Minute
	c, err := NewBatch(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	<-started
	hb.mute(func(string) bool { return true })
	eventually(t, "a hold", func() bool { return c.Stats().SilenceHolds == 1 })
	hb.unmute()
	eventually(t, "a|1 handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 3 || c.Stats().DeadLettered > 0
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if st := c.Stats(); st.DeadLettered != 0 {
		t.Fatalf("a|1 dead-lettered after one failure of its own (calls %v): the cut attempt was counted", calls)
	}
}

// TestSilenceLoopChecksWhenHoldEnds: a hold that ends on answers to
// heartbeats sent long ago leaves the member as silent as before: the
// silence loop checks again at once, not a hold period later (here an
// hour, which the test would not wait for).
func TestSilenceLoopChecksWhenHoldEnds(t *testing.T) {
	log := zerolog.Nop()
	m := newMembership("g", &log)
	m.setSessionTimeout(time.Hour)
	now := time.Now()
	m.phase, m.answered, m.sentAt = phaseInSession, now, now.Add(-holdAfter(time.Hour))
	c := &Consumer{member: m}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.silenceLoop(done) }()
	defer func() { close(done); <-stopped }()
	eventually(t, "the first hold", func() bool { return m.holds.Load() == 1 })
	first := m.gate()
	old := groupwire.Answer{Key: int16(kmsg.Heartbeat), Sent: now.Add(-2 * time.Hour)} // sent before the last answered one
	m.onAnswer(old)
	m.onAnswer(old)
	select { // the loop may begin the next hold at once: look at the first one
	case <-first.over:
	default:
		t.Fatal("the hold did not end at the second heartbeat answered in a session")
	}
	eventually(t, "a second hold, the silence going on", func() bool { return m.holds.Load() == 2 })
}
