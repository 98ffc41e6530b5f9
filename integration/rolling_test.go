package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// Scenario 8, rolling deploy: three members are replaced one by one while
// handlers of a few hundred milliseconds run. Each replacement starts as
// its predecessor begins to drain, so the group rebalances during every
// drain. The drained member keeps its partitions until its handlers
// finished and it committed: no session runs on two members at once, no
// order violation, nothing lost; and each member's Run returns within its
// ShutdownTimeout + CommitTimeout + LeaveTimeout.
func TestRollingDeploy(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 6)
	l := lanestest.NewLedger()
	sessions := sessionNames(60)
	const per = 40
	start := time.Now()
	c.produce(t, topic, sessions, per, l)
	cfg := c.consumerConfig("rolling", topic, dlq)
	cfg.ShutdownTimeout = 20 * time.Second
	f := faults{transient: 0.02, slow: 0.05, work: 2 * time.Millisecond, slowWork: 400 * time.Millisecond}
	var members []*member
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("old%d", i)
		members = append(members, startMember(t, name, cfg, handler(name, l, f)))
	}
	waitFinished(t, l, len(sessions)*per/10, 5*time.Minute)
	bound := cfg.ShutdownTimeout + consumer.DefaultCommitTimeout + consumer.DefaultLeaveTimeout + 5*time.Second
	for i, old := range members {
		began := time.Now()
		stopped := make(chan error, 1)
		go func() { stopped <- old.stop() }() // the old member drains ...
		name := fmt.Sprintf("new%d", i+1)
		startMember(t, name, cfg, handler(name, l, f)) // ... while its replacement joins
		if err := <-stopped; err != nil {
			t.Errorf("%s: Run: %v", old.name, err)
		}
		if took := time.Since(began); took > bound {
			t.Errorf("%s: Run returned %v after cancel, bound %v", old.name, took, bound)
		}
		t.Logf("%s replaced by %s; its shutdown took %v; %d of %d accounted",
			old.name, name, time.Since(began).Round(time.Millisecond), l.Accounted(), len(sessions)*per)
	}
	waitFinished(t, l, len(sessions)*per, 5*time.Minute)
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}
