package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Fault 5, consumer processes under a broker loss: four consumers run as
// OS processes; while the leader of partition 0 is down (SIGKILL, 20 s),
// one consumer process is SIGKILLed and replaced, and another is replaced
// gracefully (SIGTERM while its successor starts). Nothing is lost, no
// session runs out of order or on two processes at once.
func TestClusterConsumerProcesses(t *testing.T) {
	fc := newFaultCluster(t)
	r := fc.begin(t, "procs", runShape{per: 300, pace: 100 * time.Millisecond})
	ch := newChildren(t, fc.brokers, r.group, r.topic, r.dlq)
	for range 4 {
		ch.spawn()
	}
	progress := func(n int, state string) {
		t.Helper()
		from := ch.calls.load(t, r.l)
		began := time.Now()
		waitProgress(t, ch.calls, r.l, n, r.total)
		t.Logf("%s: %d more messages finished in %v (%d of %d)", state, r.l.Accounted()-from,
			time.Since(began).Round(time.Millisecond), r.l.Accounted(), r.total)
	}
	progress(r.total/6, "before the fault")
	victim := fc.leader(t, r.topic, 0)
	fc.node(t, "kill-node", victim)
	back := time.Now().Add(20 * time.Second)
	members := ch.names()
	slices.Sort(members)
	ch.kill(members[0])
	killed := ch.spawn()
	t.Logf("node %d down; consumer process %s SIGKILLed, %s started", victim, members[0], killed)
	replaced := make(chan error, 1)
	go func() { replaced <- ch.term(members[1]) }() // drains while its successor joins
	successor := ch.spawn()
	if err := <-replaced; err != nil {
		t.Errorf("graceful replacement: %v", err)
	}
	t.Logf("consumer process %s stopped gracefully, %s started", members[1], successor)
	progress(1000, fmt.Sprintf("node %d down, two consumer processes replaced", victim))
	sleepUntil(back)
	fc.node(t, "start-node", victim)
	r.ld.stop()
	r.ld.wait(t, 4*time.Minute)
	r.per = r.ld.rounds
	r.total = len(r.sessions) * r.per
	deadline := time.Now().Add(4 * time.Minute)
	for ch.calls.load(t, r.l) < r.total {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d of %d finished", r.l.Accounted(), r.total)
		}
		time.Sleep(200 * time.Millisecond) // the children report through files: poll them
	}
	for _, name := range ch.names() {
		if err := ch.term(name); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	ch.calls.load(t, r.l)
	fc.readDLQ(t, r.dlq, r.l)
	fc.checkLog(t, r.topic, r.sessions, r.per)
	faultReport(t, fc.cluster, "4 consumer processes; a leader SIGKILLed for 20 s, meanwhile one process SIGKILLed, one replaced", r.l, time.Since(r.start))
}
