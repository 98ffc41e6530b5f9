package consumer

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// TestBreakerWaitersCountedBack: lanes held by an open breaker count as its
// waiters for as long as they wait, whichever way the wait ends: fenced
// (revoke, shutdown), their record done meanwhile (skipped as stalled), or
// the breaker closing (they attempt).
func TestBreakerWaitersCountedBack(t *testing.T) {
	c := breakerOnly()
	part := func(n int) (*partition, []*work) {
		p := newPartition(context.Background(), partKey{"t", int32(n)}, 1, 100, nil)
		var ws []*work
		recs := []*kgo.Record{{Topic: "t", Partition: int32(n), Offset: 0}, {Topic: "t", Partition: int32(n), Offset: 1}}
		p.admit(recs, 2, nil, func(_ int, seq uint64) { ws = append(ws, &work{p: p, seq: seq}) })
		return p, ws
	}
	c.breakerReport(newPartition(context.Background(), partKey{"t", 9}, 1, 10, nil), 0, errors.New("down"))
	if !c.brk.OpenNow() {
		t.Fatal("not open after a failure with MinCalls 1")
	}
	fenced, fw := part(0)
	skipped, sw := part(1)
	_, cw := part(2)
	type res struct {
		w               *work
		probe           breaker.ProbeID
		waited, attempt bool
	}
	out := make(chan res)
	all := append(append(append([]*work{}, fw...), sw...), cw...)
	for _, w := range all {
		go func() {
			probe, waited, ok := c.breakerWait(w)
			out <- res{w, probe, waited, ok}
		}()
	}
	for c.brk.Waiters() != int64(len(all)) {
		runtime.Gosched() // no signal for "waiting": poll the count
	}
	got := map[*work]res{}
	collect := func(n int) {
		for range n {
			r := <-out
			got[r.w] = r
		}
	}
	fenced.stopStarting()
	collect(len(fw))
	for _, w := range sw {
		skipped.markDone(w.seq)
	}
	collect(len(sw))
	if n := c.brk.Waiters(); n != int64(len(cw)) {
		t.Fatalf("%d waiters after the fenced and skipped lanes left, want %d", n, len(cw))
	}
	// Close the breaker: a probe (due in an hour) succeeds.
	a := c.brk.Allow(time.Now().Add(2 * time.Hour))
	if !a.OK || a.Probe == 0 {
		t.Fatalf("no probe when due: %+v", a)
	}
	c.breakerReport(newPartition(context.Background(), partKey{"t", 9}, 1, 10, nil), a.Probe, nil)
	collect(len(cw))
	if n := c.brk.Waiters(); n != 0 {
		t.Fatalf("%d waiters after every lane left, want 0", n)
	}
	for _, w := range all {
		r := got[w]
		want := w.p != fenced && w.p != skipped
		if !r.waited || r.attempt != want || r.probe != 0 {
			t.Errorf("partition %d seq %d: waited %v, attempt %v, probe %d; want true, %v, 0",
				w.p.key.partition, w.seq, r.waited, r.attempt, r.probe, want)
		}
	}
}
