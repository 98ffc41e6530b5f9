package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// answers to heartbeats (HookBrokerE2E). It answers whether the member is
// in its group:
//
//   - not yet: no assignment since Run started (with the last group error);
//   - out: partitions lost or a group error ended the session, from then
//     until the next assignment (the classic protocol, or a KIP-848 member
//     the broker fenced);
//   - silent: in a session, but no heartbeat was answered for longer than
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
	answered       time.Time // the latest heartbeat answered, or the session's start
	silenceWarned  bool      // the current silence was logged
}

var (
	_ kgo.HookGroupManageError = (*membership)(nil)
	_ kgo.HookBrokerE2E        = (*membership)(nil)
)

func newMembership(group string, log *zerolog.Logger) *membership {
	return &membership{group: group, log: log, sessionTimeout: kgoDefaultSessionTimeout}
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
// at every session's start, with nothing new too). A KIP-848 member whose
// heartbeats keep failing restarts its session without a revoke or a loss
// in between: that assignment is no answer from the coordinator, so it
// leaves the silence as it was.
func (m *membership) assigned(next rebalanceFn) rebalanceFn {
	return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		if m.phase != phaseInSession {
			m.phase, m.outSince, m.lastErr, m.answered, m.silenceWarned = phaseInSession, time.Time{}, nil, time.Now(), false
		}
		m.mu.Unlock()
		next(ctx, cl, ps)
	}
}

// revoked wraps OnPartitionsRevoked: a session ends (the callback runs at
// its end, also with nothing to revoke) and a join for the next begins;
// franz-go ends a join that fails with a loss.
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
			m.phase, m.outSince = phaseOut, time.Now()
		}
		m.mu.Unlock()
		next(ctx, cl, ps)
	}
}

// OnGroupManageError records the error that ended a group session or a
// join attempt (franz-go calls the lost callback just before).
func (m *membership) OnGroupManageError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastErr = err
	if m.phase == phaseInSession || m.phase == phaseRebalancing {
		m.phase, m.outSince = phaseOut, time.Now()
	}
}

// OnBrokerE2E sees the coordinator answer a heartbeat, classic or KIP-848.
func (m *membership) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if (key != int16(kmsg.Heartbeat) && key != int16(kmsg.ConsumerGroupHeartbeat)) || e2e.Err() != nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	silent := m.phase == phaseInSession && m.silenceWarned
	m.answered, m.silenceWarned = now, false
	m.mu.Unlock()
	if silent {
		m.log.Info().Str("group", m.group).Msg("group coordinator answers heartbeats again")
	}
}

// silentLocked reports, in a session, since when no heartbeat was
// answered, and whether that is longer than the session timeout.
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
		m.log.Warn().Str("group", m.group).Time("since", since).Dur("session_timeout", st).
			Msg("group coordinator has answered no heartbeat for longer than the session timeout: the group counts this member gone and gives its partitions to others; not ready until it rejoins")
	}
}

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
	if since, silent := m.silentLocked(now); silent {
		return fmt.Sprintf("group %q: no heartbeat answered since %s (%v), longer than the session timeout %v: the group counts this member gone",
			m.group, since.UTC().Format(time.RFC3339), now.Sub(since).Round(100*time.Millisecond), m.sessionTimeout)
	}
	return ""
}
