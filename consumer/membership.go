package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/hold"
)

// memberPhase is where a member stands with its group.
type memberPhase int

const (
	phaseJoining     memberPhase = iota // never assigned yet
	phaseInSession                      // assigned (possibly nothing), heartbeating
	phaseRebalancing                    // a session ended with a revoke; the next assignment follows
	phaseOut                            // the session failed (partitions lost, a group error); rejoining
)

// membership follows the member's standing in its group, under both group
// protocols, from the rebalance callbacks (it wraps the consumer's own),
// franz-go's group errors (HookGroupManageError) and the coordinator's
// answers to heartbeats and syncs, with their error codes, as the group
// client's connections read them (groupwire, onAnswer). It answers whether
// the member is in its group:
//
//   - not yet: no assignment since Run started (with the last group error);
//   - out: partitions lost or a group error ended the session, from then
//     until the next assignment (the classic protocol, or a KIP-848 member
//     the broker fenced);
//   - silent: in a session, but no heartbeat was taken for longer than
//     the session timeout, so the coordinator counts the member gone
//     (a KIP-848 member retries its heartbeats without ending the session).
//
// A member assigned nothing (more members than partitions) is in its group.
type membership struct {
	group string
	log   *zerolog.Logger

	mu             sync.Mutex
	sessionTimeout time.Duration // kgo.SessionTimeout's value
	phase          memberPhase
	outSince       time.Time // phaseOut: when the session failed
	lastErr        error     // the latest group error; cleared by an assignment
	answered       time.Time // when the latest heartbeat (or classic sync) was taken, or the session's start
	sentAt         time.Time // when the latest one taken was sent, or the session's start
	silenceWarned  bool      // the current silence was logged
	assigning      bool      // the assigned callback takes up new partitions (committed offsets, parked sets)

	// The silence hold (silence.go): held is the hold in force, nil when
	// none (set and cleared under mu, read without it); holds counts the
	// holds begun.
	held  atomic.Pointer[holdGate]
	holds atomic.Uint64
	// wake tells the silence loop to check again at once: a hold ended or
	// a session began, and the next hold may be due before the check the
	// loop planned (the answers may be to heartbeats sent long ago).
	wake chan struct{}
	// clock is time.Now; a test sets its own.
	clock func() time.Time
	// heldTime is told when a hold begins and ends, for the stall watch
	// (stall_clock.go); nil: not told.
	heldTime *hold.Clock
	// proto is the group protocol of the latest group request the
	// coordinator answered (protoClassic, protoConsumer; 0 none yet): at
	// an assignment, the protocol that assigned it.
	proto atomic.Int32
}

// The group protocols a member can be in, as park fences name them.
const (
	protoClassic  = 1
	protoConsumer = 2
)

// protocol names the group protocol this member's latest assignment came
// through: "classic", "consumer" (KIP-848), or "" before any.
func (m *membership) protocol() string {
	switch m.proto.Load() {
	case protoClassic:
		return "classic"
	case protoConsumer:
		return "consumer"
	}
	return ""
}

var (
	_ kgo.HookGroupManageError = (*membership)(nil)
	_ kgo.HookBrokerE2E        = (*membership)(nil)
)

func newMembership(group string, log *zerolog.Logger) *membership {
	return &membership{group: group, log: log, sessionTimeout: kgoDefaultSessionTimeout, wake: make(chan struct{}, 1), clock: time.Now}
}

// kgoDefaultSessionTimeout is franz-go's default session timeout, and the
// broker's default group.consumer.session.timeout.ms for KIP-848 groups.
const kgoDefaultSessionTimeout = 45 * time.Second

// setSessionTimeout takes the client's session timeout (OptValue of
// kgo.SessionTimeout).
func (m *membership) setSessionTimeout(v any) {
	d, ok := v.(time.Duration)
	if !ok || d <= 0 {
		return
	}
	m.mu.Lock()
	m.sessionTimeout = d
	m.mu.Unlock()
}

type rebalanceFn = func(context.Context, *kgo.Client, map[string][]int32)

// assigned wraps OnPartitionsAssigned: a session began (franz-go calls it
// at every session's start, with nothing new too). The silence is counted
// from the coordinator's answers (OnBrokerE2E), never from a callback: a
// KIP-848 member whose heartbeats keep failing restarts its session without
// a revoke or a loss in between, and one that gave a partition up keeps
// the others through the revoke and the assignment that follows, answered
// or not. A member that joins anew (owning nothing until now) starts
// afresh. After a classic rebalance, the assignment a sync answered during
// a hold ends it: the partitions given away meanwhile (a member the group
// counted gone rejoins as a new one, with no loss) were revoked just
// before.
func (m *membership) assigned(next rebalanceFn) rebalanceFn {
	return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		var held *holdGate
		switch m.phase {
		case phaseJoining, phaseOut:
			if m.sentAt.IsZero() {
				now := m.clock()
				m.answered, m.sentAt = now, now
			}
			m.outSince, m.lastErr, m.silenceWarned = time.Time{}, nil, false
			held = m.endHoldLocked()
			m.poke()
		case phaseRebalancing:
			if g := m.held.Load(); g != nil && g.synced {
				held = m.endHoldLocked()
			}
		}
		m.phase = phaseInSession
		m.assigning = len(ps) > 0
		m.mu.Unlock()
		if held != nil {
			m.log.Info().Str("group", m.group).Stringer("held_for", m.clock().Sub(held.since)).
				Msg("group coordinator assigned this member its partitions again: held work resumes")
		}
		defer func() { // also when next panics: the take-up is over either way
			m.mu.Lock()
			m.assigning = false
			m.mu.Unlock()
		}()
		next(ctx, cl, ps)
	}
}

// revoked wraps OnPartitionsRevoked: a session ends (the callback runs at
// its end, also with nothing to revoke) and a join for the next begins;
// franz-go ends a join that fails with a loss. It leaves a silence hold
// in force: the member keeps the partitions it was not asked to give up
// (cooperative, KIP-848), and franz-go also ends a session this way on its
// own (a changed subscription), with no word from the coordinator.
func (m *membership) revoked(next rebalanceFn) rebalanceFn {
	return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		if m.phase == phaseInSession {
			m.phase = phaseRebalancing
		}
		m.mu.Unlock()
		next(ctx, cl, ps)
	}
}

// lost wraps OnPartitionsLost: the session failed (franz-go calls it on
// every failed attempt, with nothing lost too).
func (m *membership) lost(next rebalanceFn) rebalanceFn {
	return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		if m.phase == phaseInSession || m.phase == phaseRebalancing {
			m.phase, m.outSince = phaseOut, m.clock()
		}
		m.mu.Unlock()
		next(ctx, cl, ps)
		m.endHold() // after: the lost partitions are released, none of their attempts starts
	}
}

// OnGroupManageError records the error that ended a group session or a
// join attempt (franz-go calls the lost callback just before).
func (m *membership) OnGroupManageError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastErr = err
	if m.phase == phaseInSession || m.phase == phaseRebalancing {
		m.phase, m.outSince = phaseOut, m.clock()
	}
}

// OnBrokerE2E notes the group protocol of the group requests the
// coordinator answers.
func (m *membership) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil {
		return
	}
	switch key {
	case int16(kmsg.ConsumerGroupHeartbeat):
		m.proto.Store(protoConsumer)
	case int16(kmsg.JoinGroup), int16(kmsg.SyncGroup), int16(kmsg.Heartbeat):
		m.proto.Store(protoClassic)
	}
}

// checkSilence begins a hold when the member, in a session or rebalancing
// (it may own partitions), has had no heartbeat taken for holdAfter
// since the last one taken was sent; cut is then called (outside the
// lock) to cut the attempts running. It returns when to check again: never
// after the hold could be due.
func (m *membership) checkSilence(now time.Time, cut func()) time.Duration {
	m.mu.Lock()
	after := holdAfter(m.sessionTimeout)
	due := m.sentAt.Add(after)
	if (m.phase != phaseInSession && m.phase != phaseRebalancing) || m.held.Load() != nil {
		m.mu.Unlock()
		return after // a session starting now is due no sooner
	}
	if now.Before(due) {
		m.mu.Unlock()
		return due.Sub(now)
	}
	g := &holdGate{since: now, over: make(chan struct{})}
	m.held.Store(g)
	m.holds.Add(1)
	m.heldTime.Set(hold.Silence, true, now)
	sent, st := m.sentAt, m.sessionTimeout
	m.mu.Unlock()
	m.log.Warn().Str("group", m.group).Time("last_answered_sent", sent).Stringer("session_timeout", st).
		Msg("group coordinator has taken no heartbeat for four fifths of the session timeout (" + untaken + "): holding this member's work " +
			"(running handlers cancelled, none started) so that none runs while the group may give its partitions to another member; " +
			"it resumes once the session is seen going on (a second heartbeat taken in a session, or the assignment a rebalance ends with). Check the brokers and the network between them and this member")
	cut()
	return after
}

// endHoldLocked ends the hold in force, returning it (nil when none).
// m.mu held.
func (m *membership) endHoldLocked() *holdGate {
	g := m.held.Swap(nil)
	if g != nil {
		close(g.over)
		m.heldTime.Set(hold.Silence, false, m.clock())
		m.poke()
	}
	return g
}

// poke wakes the silence loop (wake).
func (m *membership) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// endHold ends the hold in force, if any.
func (m *membership) endHold() {
	m.mu.Lock()
	m.endHoldLocked()
	m.mu.Unlock()
}

// gate returns the hold in force, nil when none.
func (m *membership) gate() *holdGate { return m.held.Load() }

// heldSince reports whether a hold is in force or began since the count
// of holds was holds0.
func (m *membership) heldSince(holds0 uint64) bool {
	return m.held.Load() != nil || m.holds.Load() != holds0
}

// silentLocked reports, in a session, since when no heartbeat was
// taken, and whether that is longer than the session timeout.
func (m *membership) silentLocked(now time.Time) (time.Time, bool) {
	return m.answered, m.phase == phaseInSession && now.Sub(m.answered) > m.sessionTimeout
}

// watch logs, once, a silence past the session timeout; the watchdog calls
// it every tick.
func (m *membership) watch(now time.Time) {
	m.mu.Lock()
	since, silent := m.silentLocked(now)
	warn := silent && !m.silenceWarned
	m.silenceWarned = m.silenceWarned || warn
	st := m.sessionTimeout
	m.mu.Unlock()
	if warn {
		m.log.Warn().Str("group", m.group).Time("since", since).Stringer("session_timeout", st).
			Msg("group coordinator has taken no heartbeat for longer than the session timeout (" + untaken + "): the group counts this member gone and gives its partitions to others; not ready until it rejoins")
	}
}

// untaken says what a heartbeat not taken is, in the silence's log lines
// and readiness reasons: onAnswer counts only an answer with no error
// (and a classic heartbeat's REBALANCE_IN_PROGRESS).
const untaken = "none answered, or each answered with an error such as NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE: the coordinator moving or loading"

// reason is the readiness reason about the group, or "".
func (m *membership) reason(now time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.phase {
	case phaseJoining:
		r := "not assigned yet: the group has not given this member its partitions"
		if m.lastErr != nil {
			r += fmt.Sprintf("; last group error: %v", m.lastErr)
		}
		return r
	case phaseOut:
		why := "its partitions were lost"
		if m.lastErr != nil {
			why = m.lastErr.Error()
		}
		return fmt.Sprintf("not in group %q since %s: %s; rejoining", m.group, m.outSince.UTC().Format(time.RFC3339), why)
	}
	since, silent := m.silentLocked(now)
	held := m.held.Load()
	switch { // a silence or a hold first: the group may count the member gone, also while it takes up partitions
	case silent:
		return fmt.Sprintf("group %q: no heartbeat taken since %s (%v; "+untaken+"), longer than the session timeout %v: the group counts this member gone; not ready until the coordinator takes one, and its work stays held until the session is seen going on (check the coordinator's broker)",
			m.group, since.UTC().Format(time.RFC3339), now.Sub(since).Round(100*time.Millisecond), m.sessionTimeout)
	case held != nil && m.answered.After(held.since): // taken again, the hold not over yet
		return fmt.Sprintf("group %q: this member holds its work (handlers cancelled, none started) since %s (%v), begun near the session timeout %v with no heartbeat taken; the coordinator takes them again: the work resumes at the second taken in a session, or at the assignment a rebalance ends with",
			m.group, held.since.UTC().Format(time.RFC3339), now.Sub(held.since).Round(100*time.Millisecond), m.sessionTimeout)
	case held != nil:
		return fmt.Sprintf("group %q: no heartbeat taken since %s (%v; "+untaken+"), near the session timeout %v: this member holds its work (handlers cancelled, none started) until the coordinator takes heartbeats again",
			m.group, since.UTC().Format(time.RFC3339), now.Sub(since).Round(100*time.Millisecond), m.sessionTimeout)
	case m.assigning:
		return fmt.Sprintf("group %q: taking up newly assigned partitions (reading their committed offsets and, with parking, rebuilding their parked sessions); they are handled once that is done", m.group)
	}
	return ""
}
