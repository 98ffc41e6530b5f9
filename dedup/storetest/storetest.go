// Package storetest is the test suite every dedup.Store passes: the claim
// protocol on the store itself, then lanes consumers on an embedded broker
// with the dedup middleware over the store, where an event's effect must be
// applied once whatever is delivered twice: the same event ID sent twice,
// a redelivery after a crash before the offset commit, a crash in the
// middle of a handler, two members of a group across rebalances, and the
// store down for a while (attempts fail and are retried, nothing is lost).
// Records without an event ID at a reused offset (a topic deleted and
// created again) are never skipped for an old record's done mark, under
// each dedup.NoEventIDPolicy.
//
// A store module runs it from its tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) dedup.Store { return newStore(t) })
//	}
//
// Every test uses groups of its own, so one store (one server) may serve
// them all. [Server] finds a test server's address in the environment and
// skips, or in CI fails, when there is none.
package storetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/dedup"
)

// NewStore returns the store a test runs against.
type NewStore func(t *testing.T) dedup.Store

// Run runs the whole suite against the stores newStore returns.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Protocol", func(t *testing.T) { testProtocol(t, newStore(t)) })
	t.Run("ClaimExpires", func(t *testing.T) { testClaimExpires(t, newStore(t)) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testConcurrentClaims(t, newStore(t)) })
	t.Run("SameEventTwice", func(t *testing.T) { testSameEventTwice(t, newStore(t)) })
	t.Run("CrashBeforeCommit", func(t *testing.T) { testCrashBeforeCommit(t, newStore(t)) })
	t.Run("CrashMidHandler", func(t *testing.T) { testCrashMidHandler(t, newStore(t)) })
	t.Run("Rebalance", func(t *testing.T) { testRebalance(t, newStore(t)) })
	t.Run("StoreDown", func(t *testing.T) { testStoreDown(t, newStore(t)) })
	t.Run("ReusedOffset", func(t *testing.T) { testReusedOffset(t, newStore(t)) })
	t.Run("RecreatedTopic", func(t *testing.T) { testRecreatedTopic(t, newStore(t)) })
}

// Server returns the value of the environment variable env, the address of
// a test server (what names the server, e.g. "Redis"). When it is unset
// the test is skipped with a message saying how to start one, or, when CI
// is "true", fails: CI must not pass without the servers.
func Server(t testing.TB, env, what string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	msg := fmt.Sprintf("no %s server: %s is not set (start one with dedup/testservers.sh start; eval \"$(dedup/testservers.sh env)\")", what, env)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// unique returns a group name no other test or run uses.
func unique(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func want(t *testing.T, what string, got, wantSt dedup.State, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != wantSt {
		t.Fatalf("%s: %v, want %v", what, got, wantSt)
	}
}

func testProtocol(t *testing.T, s dedup.Store) {
	ctx := ctxFor(t, 30*time.Second)
	g, other := unique(t), unique(t)+"-other"
	st, err := s.Claim(ctx, g, "e1", "a", time.Minute)
	want(t, "first claim", st, dedup.Claimed, err)
	st, err = s.Claim(ctx, g, "e1", "b", time.Minute)
	want(t, "claim held by another", st, dedup.Busy, err)
	st, err = s.Claim(ctx, other, "e1", "b", time.Minute)
	want(t, "the same event in another group", st, dedup.Claimed, err)
	if err := s.Release(ctx, g, "e1", "b"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Claim(ctx, g, "e1", "c", time.Minute)
	want(t, "after a release by a token that does not hold it", st, dedup.Busy, err)
	if err := s.Release(ctx, g, "e1", "a"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Claim(ctx, g, "e1", "c", time.Minute)
	want(t, "after the holder released", st, dedup.Claimed, err)
	if err := s.Done(ctx, g, "e1"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Claim(ctx, g, "e1", "d", time.Minute)
	want(t, "done", st, dedup.Done, err)
	if err := s.Release(ctx, g, "e1", "c"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Claim(ctx, g, "e1", "c", time.Minute)
	want(t, "done, after a release by its last holder", st, dedup.Done, err)
	st, err = s.Claim(ctx, other, "e1", "z", time.Minute)
	want(t, "the other group's claim", st, dedup.Busy, err)
}

// testClaimExpires: a claim that was never marked done (its holder died)
// expires and the event can be claimed again; a done mark does not expire
// with the claim's TTL.
func testClaimExpires(t *testing.T, s dedup.Store) {
	ctx := ctxFor(t, 30*time.Second)
	g := unique(t)
	const ttl = 300 * time.Millisecond
	st, err := s.Claim(ctx, g, "dead", "a", ttl)
	want(t, "claim", st, dedup.Claimed, err)
	st, err = s.Claim(ctx, g, "finished", "a", ttl)
	want(t, "claim", st, dedup.Claimed, err)
	if err := s.Done(ctx, g, "finished"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Claim(ctx, g, "dead", "b", time.Minute)
	want(t, "before expiry", st, dedup.Busy, err)
	// No signal exists for an expiry: poll until it shows, within bounds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = s.Claim(ctx, g, "dead", "b", time.Minute)
		if err != nil || st != dedup.Busy || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want(t, "after expiry", st, dedup.Claimed, err)
	st, err = s.Claim(ctx, g, "finished", "b", time.Minute)
	want(t, "done, after the claim TTL", st, dedup.Done, err)
}

// testConcurrentClaims: of many concurrent claims on one event exactly one
// wins.
func testConcurrentClaims(t *testing.T, s dedup.Store) {
	ctx := ctxFor(t, 30*time.Second)
	g := unique(t)
	const n = 16
	var won, busy atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			st, err := s.Claim(ctx, g, "e", fmt.Sprintf("token-%d", i), time.Minute)
			switch {
			case err != nil:
				errs <- err
			case st == dedup.Claimed:
				won.Add(1)
			case st == dedup.Busy:
				busy.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if won.Load() != 1 || busy.Load() != n-1 {
		t.Fatalf("%d claimed, %d busy; want 1 and %d", won.Load(), busy.Load(), n-1)
	}
}
