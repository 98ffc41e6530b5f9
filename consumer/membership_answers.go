package consumer

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/groupwire"
)

// answerOpts are the group client's last options: its dial function
// wrapped so that its connections report the coordinator's answers to
// heartbeats and syncs, with their error codes, to the membership
// (onAnswer). The dial function is the one ClientOptions make (their
// kgo.Dialer, else franz-go's own with their DialTimeout and
// DialTLSConfig), read from a client made of the group client's options
// but the topics, closed at once (with no topic it joins nothing and
// connects to nothing; hooks in ClientOptions see it made and closed);
// DialTLSConfig is then cleared, the wrapped function dialing TLS itself.
func (c *Consumer) answerOpts() ([]kgo.Opt, error) {
	probe, err := kgo.NewClient(c.groupOpts()...) // c.wire is not set yet
	if err != nil {
		return nil, err
	}
	dial, _ := probe.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error))
	probe.Close()
	if dial == nil {
		return nil, errors.New("consumer: ClientOptions give the client no dial function (kgo.Dialer)")
	}
	return []kgo.Opt{kgo.Dialer(groupwire.Watch(dial, c.member.onAnswer, func() time.Time { return c.member.clock() }, answerKeys...)), kgo.DialTLSConfig(nil)}, nil
}

// answerKeys are the requests whose answers the group client's
// connections report to onAnswer (groupwire.Watch).
var answerKeys = []int16{int16(kmsg.Heartbeat), int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.SyncGroup)}

// onAnswer sees the coordinator answer a heartbeat, classic or KIP-848,
// or a classic sync (no heartbeat is sent while a classic group
// rebalances), with the answer's error code: the silence counts from
// when the latest one taken was sent. An answer that is an error was not
// taken (a coordinator moving or loading the group answers
// NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, and the session runs out
// all the same; an answer that fences the member ends its session), but
// for a classic heartbeat answered REBALANCE_IN_PROGRESS, which the
// coordinator counts. A hold ends at the second heartbeat taken in a
// session, or at the assignment that follows a sync taken (assigned).
func (m *membership) onAnswer(a groupwire.Answer) {
	heartbeat := a.Key == int16(kmsg.Heartbeat) || a.Key == int16(kmsg.ConsumerGroupHeartbeat)
	taken := a.Err == nil || a.Key == int16(kmsg.Heartbeat) && errors.Is(a.Err, kerr.RebalanceInProgress)
	if !taken || (!heartbeat && a.Key != int16(kmsg.SyncGroup)) {
		return
	}
	now := m.clock()
	m.mu.Lock()
	silent := m.phase == phaseInSession && m.silenceWarned
	m.answered, m.silenceWarned = now, false
	if a.Sent.After(m.sentAt) {
		m.sentAt = a.Sent
	}
	var held *holdGate
	if g := m.held.Load(); g != nil {
		switch {
		case !heartbeat:
			g.synced = true
		case m.phase == phaseInSession:
			// Two, not one: an answer can be to a heartbeat sent
			// before the hold began. While the member rebalances,
			// its partitions may differ from the group's until the
			// next assignment: answers then do not count.
			if g.answers++; g.answers >= 2 {
				held = m.endHoldLocked()
			}
		}
	}
	m.mu.Unlock()
	if held != nil {
		m.log.Info().Str("group", m.group).Stringer("held_for", now.Sub(held.since)).
			Msg("group coordinator takes heartbeats again: held work resumes")
	} else if silent {
		m.log.Info().Str("group", m.group).Msg("group coordinator takes heartbeats again")
	}
}
