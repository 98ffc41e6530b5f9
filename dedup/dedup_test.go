package dedup_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/dedup/storetest"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMemory(t *testing.T) dedup.Store {
	s, err := dedup.NewMemory(dedup.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMemory runs the store suite on the in-memory store.
func TestMemory(t *testing.T) { storetest.Run(t, newMemory) }

func TestMemoryBounded(t *testing.T) {
	now := time.Unix(0, 0)
	s, err := dedup.NewMemory(dedup.MemoryConfig{MaxEntries: 3, DoneTTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "d"} {
		if err := s.Done(ctx, "g", id); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 3 {
		t.Fatalf("%d entries, want 3", s.Len())
	}
	if st, _ := s.Claim(ctx, "g", "a", "t", time.Minute); st != dedup.Claimed {
		t.Fatalf("the oldest mark: %v, want dropped (claimed)", st)
	}
	if st, _ := s.Claim(ctx, "g", "d", "t", time.Minute); st != dedup.Done {
		t.Fatalf("the newest mark: %v, want done", st)
	}
	now = now.Add(2 * time.Minute)
	if st, _ := s.Claim(ctx, "g", "d", "t", time.Minute); st != dedup.Claimed {
		t.Fatalf("after DoneTTL: %v, want claimed", st)
	}
	if s.Len() != 1 {
		t.Fatalf("%d entries after the rest expired, want 1", s.Len())
	}
}

func TestConfig(t *testing.T) {
	store := newMemory(t)
	cases := []struct {
		cfg   dedup.Config
		field string
	}{
		{dedup.Config{Group: "g"}, "Store"},
		{dedup.Config{Store: store}, "Group"},
		{dedup.Config{Store: store, Group: "g", ClaimTTL: -1}, "ClaimTTL"},
		{dedup.Config{Store: store, Group: "g", WaitInterval: -1}, "WaitInterval"},
		{dedup.Config{Store: store, Group: "g", MarkTimeout: -1}, "MarkTimeout"},
	}
	for _, c := range cases {
		if _, err := dedup.New(c.cfg); !errors.Is(err, dedup.ErrConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("error %v, want ErrConfig naming %s", err, c.field)
		}
	}
	for _, c := range []dedup.MemoryConfig{{MaxEntries: -1}, {DoneTTL: -1}} {
		if _, err := dedup.NewMemory(c); !errors.Is(err, dedup.ErrConfig) {
			t.Errorf("NewMemory(%+v): %v, want ErrConfig", c, err)
		}
	}
	if _, err := dedup.New(dedup.Config{Store: store, Group: "g"}); err != nil {
		t.Fatal(err)
	}
}

// failing is a store whose every call fails.
type failing struct{}

var errFailing = errors.New("connection refused")

func (failing) Claim(context.Context, string, string, string, time.Duration) (dedup.State, error) {
	return 0, errFailing
}
func (failing) Done(context.Context, string, string) error            { return errFailing }
func (failing) Release(context.Context, string, string, string) error { return errFailing }

// markFails claims but cannot mark or release.
type markFails struct{ dedup.Store }

func (markFails) Done(context.Context, string, string) error            { return errFailing }
func (markFails) Release(context.Context, string, string, string) error { return errFailing }

func message(id string) *consumer.Message {
	return &consumer.Message{Record: &kgo.Record{Topic: "t", Partition: 1, Offset: 7}, EventID: id, Attempt: 1}
}

// TestStoreErrors: a claim that fails fails the attempt without running the
// handler; a mark that fails after the handler succeeded does not fail it
// (the effect is applied; failing would run it again).
func TestStoreErrors(t *testing.T) {
	ran := 0
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { ran++; return nil })
	d, _ := dedup.New(dedup.Config{Store: failing{}, Group: "g"})
	err := d.Middleware(h).Handle(context.Background(), message("e1"))
	if !errors.Is(err, dedup.ErrStore) || !errors.Is(err, errFailing) || ran != 0 {
		t.Fatalf("claim failed: error %v, handler ran %d times; want ErrStore wrapping the cause, no run", err, ran)
	}
	d, _ = dedup.New(dedup.Config{Store: markFails{newMemory(t)}, Group: "g"})
	if err := d.Middleware(h).Handle(context.Background(), message("e1")); err != nil || ran != 1 {
		t.Fatalf("mark failed: error %v, handler ran %d times; want success, one run", err, ran)
	}
	if st := d.Stats(); st.MarkErrors != 1 || st.StoreErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBusyUntilContextEnds: another holder's live claim holds the attempt
// until its context ends; the error wraps ErrBusy and the handler did not
// run.
func TestBusyUntilContextEnds(t *testing.T) {
	store := newMemory(t)
	if st, err := store.Claim(context.Background(), "g", "e1", "other", time.Hour); st != dedup.Claimed || err != nil {
		t.Fatal(st, err)
	}
	d, _ := dedup.New(dedup.Config{Store: store, Group: "g", WaitInterval: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		t.Error("handler ran while another held the claim")
		return nil
	})).Handle(ctx, message("e1"))
	if !errors.Is(err, dedup.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want ErrBusy and the deadline", err)
	}
	if st := d.Stats(); st.Waited != 1 {
		t.Fatalf("stats %+v, want 1 waited", st)
	}
}

// TestFailureReleases: a failed attempt releases its claim, so the retry
// runs at once, and a permanent failure is never marked done (a replay
// from the dead-letter topic runs it).
func TestFailureReleases(t *testing.T) {
	store := newMemory(t)
	d, _ := dedup.New(dedup.Config{Store: store, Group: "g"})
	calls := 0
	h := d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		calls++
		if calls == 1 {
			return errors.New("busy")
		}
		if calls == 2 {
			return consumer.Permanent(errors.New("poison"))
		}
		return nil
	}))
	ctx := context.Background()
	for i := range 4 {
		err := h.Handle(ctx, message("e1"))
		if (i < 2) != (err != nil) {
			t.Fatalf("attempt %d: error %v", i+1, err)
		}
	}
	if calls != 3 {
		t.Fatalf("handler ran %d times, want 3 (the fourth delivery is skipped)", calls)
	}
	if st := d.Stats(); st.Ran != 3 || st.Skipped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestKeyWithoutEventID: a message without an event ID is keyed by its
// record's place.
func TestKeyWithoutEventID(t *testing.T) {
	d, _ := dedup.New(dedup.Config{Store: newMemory(t), Group: "g"})
	calls := 0
	h := d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error { calls++; return nil }))
	for range 2 {
		if err := h.Handle(context.Background(), message("")); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("handler ran %d times, want once", calls)
	}
}
