package integration

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The children's group timeouts (helperConsumer).
const (
	childSessionTimeout   = 6 * time.Second
	childHeartbeat        = 500 * time.Millisecond
	childRebalanceTimeout = 8 * time.Second
)

// ghostAfter is how long a member of a killed process may stay listed in
// a stable group: a broker counts it gone once its session timeout passes
// with no heartbeat, counted at the latest from the answer that made the
// group stable; then a margin.
const ghostAfter = childSessionTimeout + 2*time.Second

// childClientID is the client ID of member's consumer: the group lists it
// with each member, which names the process.
func childClientID(member string) string { return "lanes-child-" + member }

// ghosts finds the members of group that belong to processes the test
// killed and that the group, stable all the while, has listed for longer
// than ghostAfter. A broker must have removed them: Apache Kafka does.
// kfake (franz-go's pkg/kfake, groups.go) does not when the process died
// while its JoinGroup waited for a rebalance: reply() starts no session
// timer when it finds the connection closed, and completeLeaderSync clears
// the pending-sync timer, so such a member stays in the stable group for
// ever, with the partitions the leader gave it, and nobody handles them
// (TestKfakeKeepsDeadJoiner). On kfake the ghosts are removed (a
// LeaveGroup for them: what the broker's session timeout would have done)
// and logged; on a real broker a ghost fails the test. Classic groups only
// (the bug is in kfake's classic group code). Only members of killed
// processes are touched, and only after the broker's own deadline: a live
// member that holds partitions and does not handle them is never hidden.
func (ch *children) ghosts(c *cluster, group string) {
	ch.t.Helper()
	if groupProtocol() != protocolClassic {
		return // the bug is in kfake's classic groups
	}
	now := time.Now()
	ch.mu.Lock()
	if now.Sub(ch.ghostCheck) < time.Second || len(ch.killed) == 0 {
		ch.mu.Unlock()
		return
	}
	ch.ghostCheck = now
	killed := make(map[string]time.Time, len(ch.killed))
	for name, at := range ch.killed {
		killed[childClientID(name)] = at
	}
	ch.mu.Unlock()
	if ch.admin == nil {
		ch.admin = c.client(ch.t)
		ch.t.Cleanup(ch.admin.Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dg, err := kadm.NewClient(ch.admin).DescribeGroups(ctx, group)
	if err != nil || dg[group].Err != nil {
		return // asked again in a second
	}
	if dg[group].State != "Stable" {
		ch.ghostSeen = nil // a rebalance: the broker may still remove them
		return
	}
	seen := ch.ghostSeen
	ch.ghostSeen = map[string]time.Time{}
	for _, m := range dg[group].Members {
		at, ok := killed[m.ClientID]
		if !ok {
			continue
		}
		since, ok := seen[m.MemberID]
		if !ok {
			since = now
		}
		ch.ghostSeen[m.MemberID] = since
		if now.Sub(since) < ghostAfter {
			continue
		}
		delete(ch.ghostSeen, m.MemberID)
		var held []int32
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range a.Topics {
				held = append(held, tp.Partitions...)
			}
		}
		if c.real {
			ch.t.Errorf("group %s, stable for %v, still lists member %s of process %s, killed %v ago (holding partitions %v): the broker never counted it gone",
				group, now.Sub(since).Round(time.Second), m.MemberID, strings.TrimPrefix(m.ClientID, childClientID("")), now.Sub(at).Round(time.Second), held)
			continue
		}
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = group
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.MemberID
		req.Members = append(req.Members, lm)
		resp, err := req.RequestWith(ctx, ch.admin)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && len(resp.Members) == 1 {
			err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
		}
		ch.t.Logf("kfake kept member %s of process %s, killed %v ago, in group %s, stable for %v (holding partitions %v; a known kfake bug: see ghosts): removed it as the broker should have (err %v)",
			m.MemberID, strings.TrimPrefix(m.ClientID, childClientID("")), now.Sub(at).Round(time.Second), group, now.Sub(since).Round(time.Second), held, err)
		if err == nil {
			ch.mu.Lock()
			ch.reaped++
			ch.mu.Unlock()
		}
	}
}
