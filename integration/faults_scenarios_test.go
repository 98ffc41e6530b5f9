package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lanesdev/lanes/integration/internal/clusterinfo"
)

// Fault 1, leader killed: the node leading partition 0 (and whatever else
// it leads) of a busy topic is killed with SIGKILL mid-run and started
// again 25 s later. The acks=all idempotent producer keeps every session's
// order in the log with no duplicate; the consumers lose nothing and keep
// order; the group goes on while the node is down.
func TestClusterLeaderKilled(t *testing.T) {
	leaderKilled(t, "leaderkill", false)
}

// Fault 1 in the transactional mode (docs/exactly-once.md, claim 3): the
// same kill, with every input's outputs read at read_committed once, whole,
// in order at the end.
func TestClusterLeaderKilledExactlyOnce(t *testing.T) {
	leaderKilled(t, "leaderkill-eos", true)
}

func leaderKilled(t *testing.T, name string, tx bool) {
	fc := newFaultCluster(t)
	r := fc.begin(t, name, runShape{per: 300, pace: 100 * time.Millisecond, members: 3, tx: tx})
	r.progress(t, r.total/6, 2*time.Minute, "before the fault")
	victim := fc.leader(t, r.topic, 0)
	led := fc.ledBy(t, r.topic, victim)
	t.Logf("node %d leads partitions %v; node %d coordinates the group", victim, led, fc.coordinator(t, r.group))
	fc.node(t, "kill-node", victim)
	back := time.Now().Add(25 * time.Second)
	r.progress(t, 1000, 2*time.Minute, fmt.Sprintf("node %d (leader of %v) killed", victim, led))
	t.Logf("partition 0 is now led by node %d", fc.leader(t, r.topic, 0))
	sleepUntil(back)
	fc.node(t, "start-node", victim)
	r.finish(t, fmt.Sprintf("leader of %d partitions SIGKILLed for 25 s", len(led)))
}

// Fault 2, rolling restart: each node in turn is stopped gracefully
// (controlled shutdown), stays down at least 5 s and is started again,
// under load; the next one goes only when every partition is fully
// replicated again, as an operator would do it. The load runs until the
// restarts are over (at most 2 minutes).
func TestClusterRollingRestart(t *testing.T) {
	rollingRestart(t, "rollingbroker", false)
}

// Fault 2 in the transactional mode (claim 3, a broker restart): every
// input's outputs read at read_committed once, whole, in order at the end.
func TestClusterRollingRestartExactlyOnce(t *testing.T) {
	rollingRestart(t, "rollingbroker-eos", true)
}

func rollingRestart(t *testing.T, name string, tx bool) {
	fc := newFaultCluster(t)
	r := fc.begin(t, name, runShape{per: 1200, pace: 100 * time.Millisecond, members: 3, tx: tx})
	r.progress(t, 3600, 2*time.Minute, "before the restarts")
	for n := int32(1); n <= 3; n++ {
		fc.node(t, "stop-node", n)
		back := time.Now().Add(5 * time.Second)
		r.progress(t, 1000, 2*time.Minute, fmt.Sprintf("node %d stopped", n))
		sleepUntil(back)
		fc.node(t, "start-node", n)
		fc.waitReplicated(t, 2*time.Minute)
	}
	if !r.ld.running() {
		t.Error("the load ended before the last restart: the restarts were not all under load")
	}
	r.progress(t, 1000, 2*time.Minute, "after the restarts")
	r.finish(t, "rolling restart of the three nodes")
}

// Fault 3, active controller killed: the leader of the metadata quorum is
// killed with SIGKILL (it is a broker too), the two others elect a new
// one, and the node comes back 20 s later.
func TestClusterControllerKilled(t *testing.T) {
	fc := newFaultCluster(t)
	r := fc.begin(t, "ctrlkill", runShape{per: 300, pace: 100 * time.Millisecond, members: 3})
	r.progress(t, r.total/6, 2*time.Minute, "before the fault")
	var victim int32
	poll(t, "the active controller", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		victim, err = clusterinfo.Controller(ctx, fc.admin)
		return err == nil, err
	})
	t.Logf("node %d is the active controller; node %d coordinates the group", victim, fc.coordinator(t, r.group))
	fc.node(t, "kill-node", victim)
	back := time.Now().Add(20 * time.Second)
	var next int32
	poll(t, "a new active controller", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		next, err = clusterinfo.Controller(ctx, fc.admin)
		return err == nil && next != victim, err
	})
	t.Logf("controller node %d killed; node %d took over", victim, next)
	r.progress(t, 1000, 2*time.Minute, fmt.Sprintf("controller node %d killed", victim))
	sleepUntil(back)
	fc.node(t, "start-node", victim)
	r.finish(t, "active controller SIGKILLed for 20 s")
}

// Fault 4, coordinator down longer than a session: the node coordinating
// the group is killed with SIGKILL and stays down 20 s, beyond the group's
// 6 s session timeout (the broker takes ~9 s to notice the loss and move
// the coordinator), then comes back.
func TestClusterCoordinatorDown(t *testing.T) {
	fc := newFaultCluster(t)
	r := fc.begin(t, "coorddown", runShape{per: 300, pace: 100 * time.Millisecond, members: 3})
	r.progress(t, r.total/6, 2*time.Minute, "before the fault")
	victim := fc.coordinator(t, r.group)
	fc.node(t, "kill-node", victim)
	back := time.Now().Add(20 * time.Second)
	r.progress(t, 1000, 2*time.Minute, fmt.Sprintf("coordinator node %d killed", victim))
	sleepUntil(back)
	fc.node(t, "start-node", victim)
	r.finish(t, "group coordinator SIGKILLed for 20 s (session timeout 6 s)")
}
