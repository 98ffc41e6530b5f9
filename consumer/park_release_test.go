package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// TestReleaseHeld: a session held after its park budget was spent is
// released by an operator with ReleaseHeld (lanes park release), not on
// the member: the owner picks the release marker up and the session's
// parked records run, in order. ReleaseHeld refuses a session that is not
// held, and one held by another group.
func TestReleaseHeld(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	produceSeqs(t, e, "chats", stuck, 0, 3)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(2, func(context.Context, *Message) error {
		if down.Load() {
			return errors.New("its backend is down")
		}
		return nil
	})
	cfg := e.config("g-release", "chats")
	cfg.Park = ParkPolicy{Enabled: true, AfterAttempts: 1, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond,
		MaxAttempts: 1, OnExhausted: ParkHold}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the session held with its two later records", func() bool {
		held := 0
		for _, p := range c.Stats().Partitions {
			held += p.Park.Held
		}
		return held == 1 && parkedRecords(c) == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, tc := range []struct{ group, session string }{{"another-group", stuck}, {"g-release", "no-such-session"}} {
		if _, err := ReleaseHeld(ctx, ParkTarget{Brokers: e.addrs, Group: tc.group, Topic: "chats"}, tc.session); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("ReleaseHeld(group %s, session %s): %v; want ErrNotHeld", tc.group, tc.session, err)
		}
	}
	if _, err := ReleaseHeld(ctx, ParkTarget{Brokers: e.addrs, Topic: "chats"}, stuck); !errors.Is(err, ErrConfig) ||
		!strings.Contains(err.Error(), "ParkTarget.Group") {
		t.Fatalf("ReleaseHeld without a group: %v; want ErrConfig naming ParkTarget.Group", err)
	}
	down.Store(false)
	var held []ParkedSession
	eventually(t, "the hold in a commit's park position", func() bool { // ReleaseHeld finds what the group committed
		held, err = ReleaseHeld(ctx, ParkTarget{Brokers: e.addrs, Group: "g-release", Topic: "chats"}, stuck)
		return !errors.Is(err, ErrNotHeld)
	})
	if err != nil || len(held) != 1 || held[0].HeldThrough != 0 || !slices.Equal(held[0].Offsets, []int64{1, 2}) {
		t.Fatalf("ReleaseHeld: %+v, %v; want the session held through offset 0 with offsets 1 and 2", held, err)
	}
	finishUnparked(t, c, rec, stop)
	var ok []int
	for _, cl := range rec.snapshot() {
		if cl.err == nil {
			ok = append(ok, cl.seq)
		}
	}
	if !slices.Equal(ok, []int{1, 2}) {
		t.Fatalf("handled %v after the release; want 1 then 2", ok)
	}
}

// TestReleasePickupMatchesItsHold: the owner's pickup applies a release
// marker only to a hold written before it, as a rebuild replaying the
// partition in offset order does: a release read late (a second release
// of an earlier hold) does not release a later hold.
func TestReleasePickupMatchesItsHold(t *testing.T) {
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 10, nil)
	p.enablePark(parkset.Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 1}, "g", 1, "classic")
	now := time.Now()
	p.mu.Lock()
	p.pk.set.Add("s", 8, 100, now)
	p.pk.set.Held("s", 99, 10)
	p.mu.Unlock()
	release := func(off int64) loggedEntry {
		return loggedEntry{off: off, e: parkset.Entry{Kind: parkset.KindRelease, Group: "g", Session: "s", Epoch: -1}}
	}
	// held reports whether s is held; s stays parked throughout (its
	// record at source offset 100).
	held := func() bool {
		t.Helper()
		for _, ps := range p.pk.set.ParkedSessions() {
			if ps.Session == "s" {
				return ps.Held
			}
		}
		t.Fatal("s not parked")
		return false
	}
	if got := p.parkReleases([]loggedEntry{release(5)}, 11, now); len(got) != 0 || !held() {
		t.Fatalf("a release written before the hold released %v", got)
	}
	other := release(12)
	other.e.Group = "h"
	if got := p.parkReleases([]loggedEntry{other}, 13, now); len(got) != 0 {
		t.Fatalf("another group's release released %v", got)
	}
	if got := p.parkReleases([]loggedEntry{release(14)}, 15, now); !slices.Equal(got, []string{"s"}) || held() {
		t.Fatalf("a release written after the hold: released %v", got)
	}
}

// TestReleaseParkedDurable: ReleaseParked writes a release marker, so the
// release outlives the member. Session a is held with nothing parked
// behind it (no retry follows the release, so no done marker), while b,
// parked before it, keeps the committed park position below a's hold
// marker: after a restart the rebuild replays the hold, and without the
// marker holds a again and parks its next record behind a hold the
// operator released. A release whose marker cannot be written says so and
// leaves the session held. Every record is accounted for: a|0
// dead-lettered, a|1 and a|2 handled in order, b|0 parked throughout.
// (Found by review: ReleaseParked released in memory only.)
func TestReleaseParkedDurable(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	refused, _ := e.refuseWrites("chats.park")
	var aDown atomic.Bool
	aDown.Store(true)
	rec := newRecorder(2, func(_ context.Context, m *Message) error {
		if m.SessionID == "b" || aDown.Load() {
			return Park(errors.New("its backend is down"))
		}
		return nil
	})
	edit := func(p *ParkPolicy) { p.MaxAttempts, p.OnExhausted = 1, ParkHold }
	c, stop := startDueByHand(t, e, "g-release-durable", rec, edit)
	e.produceValues("chats", "b|0")
	eventually(t, "b parked", func() bool { return parkedRecords(c) == 1 })
	e.produceValues("chats", "a|0")
	eventually(t, "a parked", func() bool { return parkedRecords(c) == 2 })
	makeDue(t, c, "a")
	eventually(t, "a held, nothing of it parked", func() bool { return heldIn(c) == 1 && parkedRecords(c) == 1 })

	refused.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ReleaseParkedContext(ctx, "chats", 0, "a"); err == nil || errors.Is(err, ErrNotHeld) ||
		!strings.Contains(err.Error(), "stays held") || !strings.Contains(err.Error(), "release it again") {
		t.Fatalf("release with the park topic refusing writes: %v; want an error saying the session stays held and to release it again", err)
	}
	if heldIn(c) != 1 {
		t.Fatal("a released although its release marker was not written")
	}
	refused.Store(false)
	if !c.ReleaseParked("chats", 0, "a") {
		t.Fatal("ReleaseParked: a not released")
	}
	if err := c.ReleaseParkedContext(ctx, "chats", 0, "a"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a second release: %v; want ErrNotHeld", err)
	}
	aDown.Store(false)
	e.produceValues("chats", "a|1")
	eventually(t, "a|1 handled", func() bool { return succeeded(rec, "a", 1) })
	if n := heldIn(c); n != 0 {
		t.Fatalf("%d sessions held after the release", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	c2, stop2 := startDueByHand(t, e, "g-release-durable", rec, edit)
	e.produceValues("chats", "a|2")
	eventually(t, "a|2 handled, or parked behind a hold", func() bool { return succeeded(rec, "a", 2) || parkedRecords(c2) > 1 })
	if n, parked := heldIn(c2), parkedRecords(c2); n != 0 || parked != 1 || !succeeded(rec, "a", 2) {
		t.Fatalf("after a restart: %d sessions held, %d records parked, a|2 handled %v; want a released for good (none held, b|0 parked, a|2 handled)",
			n, parked, succeeded(rec, "a", 2))
	}
	rec.wait(t)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cl := range rec.snapshot() {
		got = append(got, fmt.Sprintf("%s|%d %v", cl.session, cl.seq, cl.err == nil))
	}
	if want := []string{"b|0 false", "a|0 false", "a|0 false", "a|1 true", "a|2 true"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
	if d := readDLQ(t, e, 1); string(d[0].Value) != "a|0" || Reason(header(d[0], HeaderDLQReason)) != ReasonParkExhausted {
		t.Fatalf("DLQ holds %q (reason %q); want a|0, park-exhausted", d[0].Value, header(d[0], HeaderDLQReason))
	}
}

// heldIn is the number of sessions c holds.
func heldIn(c *Consumer) int {
	n := 0
	for _, p := range c.Stats().Partitions {
		n += p.Park.Held
	}
	return n
}

// succeeded reports whether rec saw seq of session handled.
func succeeded(rec *recorder, session string, seq int) bool {
	for _, cl := range rec.snapshot() {
		if cl.session == session && cl.seq == seq && cl.err == nil {
			return true
		}
	}
	return false
}
