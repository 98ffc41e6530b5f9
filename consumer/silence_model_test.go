package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/groupwire"
)

// silenceModel is the reference for the silence hold's rules, kept as
// plainly as possible
// (https://github.com/lanesdev/lanes/blob/main/docs/guarantees.md#1-session-order):
//
//   - a hold begins at a check when the member is in a session or
//     rebalancing and no heartbeat or sync taken was sent within
//     holdAfter (taken: answered with no error code, or a classic
//     heartbeat answered REBALANCE_IN_PROGRESS; an answer with another
//     error code, or one not decodable, counts for nothing);
//   - it ends at the second heartbeat taken in a session, at an
//     assignment that follows a sync taken while it held, at an
//     assignment after a fresh join (the member was out or joining), or
//     after a loss;
//   - nothing else ends it: not a revoke, not a join answered, not an
//     errored request, not a group error.
type silenceModel struct {
	now      time.Time
	phase    memberPhase
	sentAt   time.Time // the latest send time of an answered heartbeat or sync
	held     bool
	answers  int  // heartbeats answered in a session since the hold began
	synced   bool // a sync answered since the hold began
	holds    int
	lastHold time.Time
}

// TestSilenceModel drives the membership with random group events on a
// fake clock and compares, after every step, whether a hold is in force
// and how many began with the reference; it also checks that a check is
// never planned after a hold is due. 300 seeds × 300 steps.
func TestSilenceModel(t *testing.T) {
	for seed := range uint64(300) {
		if !runSilenceModel(t, seed, 300) {
			return
		}
	}
}

func runSilenceModel(t *testing.T, seed uint64, steps int) bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	const st = 10 * time.Second
	after := holdAfter(st)
	start := time.Unix(1_700_000_000, 0)
	clock := start
	m := clockedMembership(&clock, st)
	ref := &silenceModel{now: clock, phase: phaseJoining}
	noop := func(context.Context, *kgo.Client, map[string][]int32) {}
	ps := map[string][]int32{"t": {0}}
	var trail []string
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d: %s\nlast steps: %v", seed, fmt.Sprintf(format, args...), trail[max(0, len(trail)-20):])
		return false
	}
	answer := func(key kmsg.Key, rtt time.Duration, err error) {
		m.onAnswer(groupwire.Answer{Key: int16(key), Sent: clock.Add(-rtt), Err: err})
	}
	for range steps {
		rtt := time.Duration(rng.Int64N(int64(st / 2)))
		switch k := rng.IntN(13); k {
		case 0, 1: // time passes
			d := time.Duration(rng.Int64N(int64(st)))
			clock = clock.Add(d)
			trail = append(trail, "wait "+d.String())
		case 2, 3: // a heartbeat answered
			key := kmsg.Heartbeat
			if rng.IntN(2) == 0 {
				key = kmsg.ConsumerGroupHeartbeat
			}
			answer(key, rtt, nil)
			ref.answered(clock.Add(-rtt), true)
			trail = append(trail, "heartbeat rtt "+rtt.String())
		case 4: // a sync answered
			answer(kmsg.SyncGroup, rtt, nil)
			ref.answered(clock.Add(-rtt), false)
			trail = append(trail, "sync")
		case 5: // answers that must not count: a join, heartbeats and a sync answered with an error
			answer(kmsg.JoinGroup, rtt, nil)
			answer(kmsg.Heartbeat, rtt, kerr.NotCoordinator)
			answer(kmsg.ConsumerGroupHeartbeat, rtt, kerr.CoordinatorNotAvailable)
			answer(kmsg.ConsumerGroupHeartbeat, rtt, kerr.RebalanceInProgress)
			answer(kmsg.SyncGroup, rtt, kerr.RebalanceInProgress)
			answer(kmsg.Heartbeat, rtt, groupwire.ErrUndecodable)
			trail = append(trail, "join / errored answers")
		case 11: // a classic heartbeat answered REBALANCE_IN_PROGRESS: taken
			answer(kmsg.Heartbeat, rtt, kerr.RebalanceInProgress)
			ref.answered(clock.Add(-rtt), true)
			trail = append(trail, "heartbeat rebalancing rtt "+rtt.String())
		case 6:
			m.assigned(noop)(context.Background(), nil, ps)
			ref.assigned(clock)
			trail = append(trail, "assigned")
		case 7:
			m.revoked(noop)(context.Background(), nil, ps)
			ref.revoked()
			trail = append(trail, "revoked")
		case 8:
			m.lost(noop)(context.Background(), nil, ps)
			ref.lost()
			trail = append(trail, "lost")
		case 9:
			m.OnGroupManageError(errors.New("injected: group error"))
			ref.groupError()
			trail = append(trail, "group error")
		default: // the silence loop's check
			began := 0
			wait := m.checkSilence(clock, func() { began++ })
			want := ref.check(clock, after)
			trail = append(trail, "check")
			if (began == 1) != want {
				return fail("check at %v: hold begun %v, want %v", clock.Sub(start), began == 1, want)
			}
			if !ref.held && (ref.phase == phaseInSession || ref.phase == phaseRebalancing) &&
				clock.Add(wait).After(ref.sentAt.Add(after)) && clock.Before(ref.sentAt.Add(after)) {
				return fail("next check in %v, after the hold is due at %v", wait, ref.sentAt.Add(after).Sub(start))
			}
		}
		if got := m.gate() != nil; got != ref.held {
			return fail("hold in force %v, want %v", got, ref.held)
		}
		if got := int(m.holds.Load()); got != ref.holds {
			return fail("%d holds counted, want %d", got, ref.holds)
		}
	}
	return true
}

func (r *silenceModel) answered(sent time.Time, heartbeat bool) {
	if sent.After(r.sentAt) {
		r.sentAt = sent
	}
	if !r.held {
		return
	}
	switch {
	case !heartbeat:
		r.synced = true
	case r.phase == phaseInSession:
		if r.answers++; r.answers >= 2 {
			r.held = false
		}
	}
}

func (r *silenceModel) assigned(now time.Time) {
	switch r.phase {
	case phaseJoining, phaseOut:
		if r.sentAt.IsZero() {
			r.sentAt = now
		}
		r.held = false
	case phaseRebalancing:
		if r.held && r.synced {
			r.held = false
		}
	}
	r.phase = phaseInSession
}

func (r *silenceModel) revoked() {
	if r.phase == phaseInSession {
		r.phase = phaseRebalancing
	}
}

func (r *silenceModel) lost() {
	if r.phase == phaseInSession || r.phase == phaseRebalancing {
		r.phase = phaseOut
	}
	r.held = false
}

func (r *silenceModel) groupError() {
	if r.phase == phaseInSession || r.phase == phaseRebalancing {
		r.phase = phaseOut
	}
}

// check reports whether a hold begins at now.
func (r *silenceModel) check(now time.Time, after time.Duration) bool {
	if r.held || (r.phase != phaseInSession && r.phase != phaseRebalancing) || now.Before(r.sentAt.Add(after)) {
		return false
	}
	r.held, r.answers, r.synced, r.holds, r.lastHold = true, 0, false, r.holds+1, now
	return true
}
