package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logTrigger is a franz-go logger that runs fire, once, at the first line
// match accepts after it is armed.
type logTrigger struct {
	match func(msg string, keyvals []any) bool
	fire  func()
	armed atomic.Bool
	once  sync.Once
}

func (l *logTrigger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *logTrigger) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	if l.armed.Load() && l.match(msg, keyvals) {
		l.once.Do(l.fire)
	}
}

// rebalanceSignalled matches franz-go's line for a heartbeat answer that
// ends the member's session for a rebalance: REBALANCE_IN_PROGRESS
// (classic), a changed assignment (KIP-848).
func rebalanceSignalled(msg string, keyvals []any) bool {
	if msg == "heartbeat saw a change in group status; partitions were added or lost" {
		return true
	}
	if msg != "heartbeat errored" {
		return false
	}
	for _, kv := range keyvals {
		if err, ok := kv.(error); ok && errors.Is(err, kerr.RebalanceInProgress) {
			return true
		}
	}
	return false
}

// TestSilenceHoldThroughRebalance: a member told by its coordinator that
// the group rebalances (a second member joined) hears nothing more from it
// while it rebalances: a KIP-848 member gives up a partition and keeps the
// other, a classic member ends its session and joins again. The
// coordinator counts it gone a session timeout after its last heartbeat
// and gives every partition to the other member. Holding its work must not
// wait for the rebalance to end, nor end with the revoke or the assignment
// that follows: no two calls of a session ever overlap across the members,
// and every message is handled. The handlers of the first member take
// long, honouring their context, once the second starts.
func TestSilenceHoldThroughRebalance(t *testing.T) {
	const sessionTimeout = 3 * time.Second
	for _, proto := range protocolsFor(t, "classic") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnvTimeout(t, 2, sessionTimeout)
			gate := e.groupGate(kmsg.Heartbeat, kmsg.ConsumerGroupHeartbeat, kmsg.JoinGroup, kmsg.SyncGroup)
			sessions := sessionNames(12)
			var slowA atomic.Bool
			rec := newRecorder(1<<30, func(ctx context.Context, m *Message) error {
				d := 5 * time.Millisecond
				if ctx.Value(memberKey{}) == "a" && slowA.Load() {
					d = time.Minute
				}
				select { // honours its context
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			group := "g-silent-rebalance-" + proto.name
			var spans spanLog
			var idA atomic.Value
			trigger := &logTrigger{match: rebalanceSignalled, fire: func() {
				id := idA.Load().(string)
				gate.mute(func(m string) bool { return m == id })
			}}
			cfgA := e.groupConfig(group, proto.opts)
			cfgA.ClientOptions = append(cfgA.ClientOptions, kgo.SessionTimeout(sessionTimeout),
				kgo.RequestTimeoutOverhead(2*sessionTimeout), kgo.WithLogger(trigger))
			a, err := New(cfgA, spans.wrap("a", tagMember("a", rec)))
			if err != nil {
				t.Fatal(err)
			}
			rounds := e.streamRounds(sessions, 5*time.Millisecond)
			stopA := start(t, a)
			eventually(t, "a to own both partitions and handle records", func() bool {
				return len(a.Stats().Partitions) == 2 && len(rec.snapshot()) > 50
			})
			eventually(t, "a heartbeat of a, alone in the group", func() bool {
				ids := gate.seen()
				if len(ids) > 1 {
					t.Fatalf("member IDs in group requests before b started: %v", ids)
				}
				if len(ids) == 1 {
					idA.Store(ids[0])
				}
				return len(ids) == 1
			})
			slowA.Store(true)
			trigger.armed.Store(true)
			cfgB := e.groupConfig(group, proto.opts)
			cfgB.ClientOptions = append(cfgB.ClientOptions, kgo.SessionTimeout(sessionTimeout))
			b, err := New(cfgB, spans.wrap("b", tagMember("b", rec)))
			if err != nil {
				t.Fatal(err)
			}
			stopB := start(t, b)
			eventually(t, "b to own every partition", func() bool { return len(b.Stats().Partitions) == 2 })
			slowA.Store(false)
			gate.unmute()
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
			if st := a.Stats(); st.SilenceHolds == 0 || st.DeadLettered != 0 {
				t.Errorf("a: %d holds (want some), %d dead-lettered (want none)", st.SilenceHolds, st.DeadLettered)
			}
			if r := strings.Join(a.Health().Reasons, "; "); strings.Contains(r, "holds its work") {
				t.Errorf("the hold still named after Run returned: %q", r)
			}
		})
	}
}

// tagMember names the member in the context of h's calls (memberKey).
func tagMember(name string, h Handler) Handler {
	return HandlerFunc(func(ctx context.Context, m *Message) error {
		return h.Handle(context.WithValue(ctx, memberKey{}, name), m)
	})
}
