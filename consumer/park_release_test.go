package consumer

import (
	"context"
	"errors"
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
