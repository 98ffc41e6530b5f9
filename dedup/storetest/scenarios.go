package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testSameEventTwice: a producer that sent one event twice (a retry after
// a lost acknowledgement): the second copy is skipped.
func testSameEventTwice(t *testing.T, s dedup.Store) {
	r := newRig(t, s)
	cl, err := r.b.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	first, second := eventid.ForSequence("session-1", 0), eventid.ForSequence("session-1", 1)
	var recs []*kgo.Record
	for _, id := range []string{first, first, second} {
		rec := &kgo.Record{Topic: topic, Key: []byte("session-1"), Value: []byte(id)}
		eventid.Stamp(rec, id, "session-1")
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(ctxFor(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.sent = []msg{{"session-1", 0, first}, {"session-1", 1, second}}
	d := r.dedup()
	l := r.run("m1", d) // the second event follows both copies of the first in its session
	r.once()
	noLoss(t, l)
	if st := d.Stats(); st.Skipped != 1 || st.Ran != 2 {
		t.Fatalf("stats %+v: want 2 ran, 1 skipped", st)
	}
}

// crashed sends a first half, runs one member over it and rewinds the
// group's offsets (a crash before the commit), then sends a second half:
// what comes next is delivered again (done: to be skipped) and new.
func crashed(t *testing.T, s dedup.Store) *rig {
	r := newRig(t, s)
	r.send(8, 0, 10)
	r.run("before-crash", r.dedup())
	r.once()
	r.rewind()
	r.send(8, 10, 10)
	return r
}

// testCrashBeforeCommit: a member handled events and crashed before
// committing their offsets; the next member gets them again and skips them.
func testCrashBeforeCommit(t *testing.T, s dedup.Store) {
	r := crashed(t, s)
	d := r.dedup()
	l := r.run("after-crash", d)
	r.once()
	noLoss(t, l)
	if st := d.Stats(); st.Skipped != 80 || st.Ran != 80 {
		t.Fatalf("stats %+v: want 80 redelivered and skipped, 80 new ones ran", st)
	}
}

// testCrashMidHandler: a member claimed an event and died before marking
// it done; the event runs again once that claim expires.
func testCrashMidHandler(t *testing.T, s dedup.Store) {
	r := newRig(t, s)
	r.send(4, 0, 5)
	dead := r.sent[0].id
	st, err := s.Claim(ctxFor(t, 10*time.Second), r.group, dead, "a-member-that-died", time.Second)
	want(t, "the dead member's claim", st, dedup.Claimed, err)
	d := r.dedup()
	l := r.run("m1", d)
	r.once()
	noLoss(t, l)
	if st := d.Stats(); st.Waited != 1 || st.Ran != 20 || st.Skipped != 0 {
		t.Fatalf("stats %+v: want 1 waited for the dead claim, 20 ran", st)
	}
}

// testRebalance: after a crash before the commit, two members share the
// group: one starts, a second joins (a rebalance), the first leaves
// (another): every event's effect is still applied once.
func testRebalance(t *testing.T, s dedup.Store) {
	r := crashed(t, s)
	n := len(r.sent)
	l := r.ledger()
	ctx := ctxFor(t, 2*time.Minute)
	d1, d2 := r.dedup(), r.dedup()
	ctx1, stop1 := context.WithCancel(ctx)
	defer stop1()
	ctx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	done1, done2 := make(chan error, 1), make(chan error, 1)
	go func() { done1 <- r.consumer("m1", l, d1, true).Run(ctx1) }()
	if err := l.WaitAccounted(ctx, n/5); err != nil {
		t.Fatal(err)
	}
	go func() { done2 <- r.consumer("m2", l, d2, true).Run(ctx2) }()
	if err := l.WaitAccounted(ctx, n/2); err != nil {
		t.Fatal(err)
	}
	stop1()
	if err := <-done1; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("first member: %v", err) // a refused final commit: its work is redone, deduplicated
	}
	err := l.WaitAccounted(ctx, n)
	stop2()
	if err2 := <-done2; err2 != nil {
		t.Logf("second member: %v", err2)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.once()
	noLoss(t, l)
	s1, s2 := d1.Stats(), d2.Stats()
	if s1.Skipped+s2.Skipped < int64(n/2) || s1.Ran+s2.Ran < int64(n/2) {
		t.Fatalf("stats %+v and %+v: want the %d redelivered skipped and the %d new run", s1, s2, n/2, n/2)
	}
	if s2.Ran+s2.Skipped == 0 {
		t.Fatalf("the second member handled nothing: no rebalance was tested")
	}
}

// down fails the first claims, as a store that is unreachable for a while.
type down struct {
	dedup.Store
	failures atomic.Int64
}

var errDown = errors.New("store unreachable")

func (d *down) Claim(ctx context.Context, group, id, token string, ttl time.Duration) (dedup.State, error) {
	if d.failures.Add(-1) >= 0 {
		return 0, errDown
	}
	return d.Store.Claim(ctx, group, id, token, ttl)
}

// testStoreDown: while the store cannot claim, attempts fail and are
// retried; no handler runs unclaimed and nothing is lost or dead-lettered.
func testStoreDown(t *testing.T, s dedup.Store) {
	flaky := &down{Store: s}
	flaky.failures.Store(30)
	r := newRig(t, flaky)
	r.send(4, 0, 10)
	d := r.dedup()
	l := r.run("m1", d)
	r.once()
	noLoss(t, l)
	if st := d.Stats(); st.StoreErrors != 30 || st.Ran != 40 {
		t.Fatalf("stats %+v: want 30 store errors, 40 ran", st)
	}
	if calls := l.Report().Calls; calls != 70 {
		t.Fatalf("%d attempts recorded, want 70: 30 failed on the store, 40 ran", calls)
	}
}
