package parkset

import (
	"testing"
	"time"
)

// TestParkReplayAttempt: a rebuild applies an attempt marker to the head
// it names only, keeps its count and the backoff from the marker's write
// time (the head is not due at once), never lowers a count, and ignores a
// marker of an owner fenced before it was written.
func TestParkReplayAttempt(t *testing.T) {
	rules := Rules{Delay: time.Second, MaxDelay: time.Minute, MaxAttempts: 5}
	t0 := time.Unix(1e9, 0)
	ps := New(rules, "")
	ps.Replay(0, Entry{Kind: KindFence}, t0)
	ps.Replay(1, Entry{Kind: KindRecord, Session: "a", Src: 10, Epoch: 0}, t0)
	ps.Replay(2, Entry{Kind: KindRecord, Session: "a", Src: 11, Epoch: 0}, t0)
	ps.Replay(3, Entry{Kind: KindAttempt, Session: "a", Src: 11, Retries: 3, Epoch: 0}, t0) // not the head
	ps.Replay(4, Entry{Kind: KindAttempt, Session: "a", Src: 10, Retries: 2, Epoch: 0}, t0.Add(time.Minute))
	ps.Replay(5, Entry{Kind: KindAttempt, Session: "a", Src: 10, Retries: 1, Epoch: 0}, t0.Add(time.Hour)) // lower
	if h, _ := ps.Head("a"); h.SrcOffset != 10 || h.Retries != 2 {
		t.Fatalf("head %+v; want source offset 10 with 2 failed retries", h)
	}
	dueAt := t0.Add(time.Minute + ps.backoff(2))
	if got := ps.Due(dueAt.Add(-time.Nanosecond)); len(got) != 0 {
		t.Fatalf("due before its backoff after the marker: %v", got)
	}
	if got := ps.Due(dueAt); len(got) != 1 {
		t.Fatalf("not due after its backoff after the marker: %v", got)
	}
	ps.RetryAbandoned("a")
	ps.Replay(6, Entry{Kind: KindFence}, t0)
	ps.Replay(7, Entry{Kind: KindAttempt, Session: "a", Src: 10, Retries: 4, Epoch: 0}, t0) // fenced writer
	if h, _ := ps.Head("a"); h.Retries != 2 {
		t.Fatalf("a fenced owner's marker applied: %d failed retries, want 2", h.Retries)
	}
	ps.Replay(8, Entry{Kind: KindDone, Session: "a", Src: 10, Epoch: 6}, t0)
	ps.Replay(9, Entry{Kind: KindAttempt, Session: "a", Src: 10, Retries: 4, Epoch: 6}, t0) // landed after its done marker
	if h, _ := ps.Head("a"); h.SrcOffset != 11 || h.Retries != 0 {
		t.Fatalf("head %+v; want source offset 11 with no failed retry", h)
	}
}
