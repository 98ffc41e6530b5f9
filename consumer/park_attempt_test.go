package consumer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestParkRetriesSurviveHandOver: the failed retries of a parked head are
// written to the park partition (attempt markers), so the member that
// rebuilds the parked set after a hand-over keeps the budget spent: with
// MaxAttempts 3, two retries failed before the hand-over and one after it
// spend the budget (the head is dead-lettered), not three more.
func TestParkRetriesSurviveHandOver(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	produceSeqs(t, e, "chats", stuck, 0, 1)
	var calls atomic.Int32
	handler := HandlerFunc(func(_ context.Context, m *Message) error {
		if calls.Add(1) == 1 {
			return Park(errors.New("its backend is down"))
		}
		return errors.New("still down")
	})
	cfg := e.config("g-park-attempts", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: time.Hour, MaxDelay: time.Hour, MaxAttempts: 3, OnExhausted: ParkRelease}
	headRetries := func(c *Consumer) int {
		for _, p := range c.own.all() {
			if h, ok := p.parkHead(stuck); ok {
				return h.Retries
			}
		}
		return -1
	}
	c1, err := New(cfg, handler)
	if err != nil {
		t.Fatal(err)
	}
	stop1 := start(t, c1)
	eventually(t, "the record parked", func() bool { return parkedRecords(c1) == 1 })
	for n := 1; n <= 2; n++ {
		makeDue(t, c1, stuck)
		eventually(t, "a failed retry", func() bool { return headRetries(c1) == n })
	}
	if err := stop1(); err != nil { // its drain waits for the retry, its marker write included
		t.Fatal(err)
	}
	c2, err := New(cfg, handler)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := start(t, c2)
	eventually(t, "the parked set rebuilt", func() bool { return parkedRecords(c2) == 1 })
	if n := headRetries(c2); n != 2 {
		t.Fatalf("after the hand-over the head has %d failed retries; want the 2 failed before it", n)
	}
	got, err := InspectParked(context.Background(), ParkTarget{Brokers: e.addrs, Group: "g-park-attempts", Topic: "chats"})
	if err != nil || len(got) != 1 || got[0].Retries != 2 {
		t.Fatalf("InspectParked: %+v, %v; want the session with 2 failed retries", got, err)
	}
	makeDue(t, c2, stuck)
	dl := readDLQ(t, e, 1)[0]
	eventually(t, "the session unparked", func() bool { return parkedRecords(c2) == 0 })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if r := headerOf(dl, HeaderDLQReason); r != string(ReasonParkExhausted) || calls.Load() != 4 {
		t.Fatalf("dead-lettered with reason %q after %d handler calls; want park-exhausted after 4 (parked, then 3 retries)", r, calls.Load())
	}
}
