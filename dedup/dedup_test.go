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
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/lanestest"
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
		{dedup.Config{Store: store, Group: "g", ClaimTTL: -1}, "ClaimTTL"},
		{dedup.Config{Store: store, Group: "g", WaitInterval: -1}, "WaitInterval"},
		{dedup.Config{Store: store, Group: "g", MarkTimeout: -1}, "MarkTimeout"},
		{dedup.Config{Store: store, Group: "g", NoEventID: dedup.KeyByPosition + 1}, "NoEventID"},
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

// groups records the group of every claim.
type groups struct {
	dedup.Store
	seen []string
}

func (g *groups) Claim(ctx context.Context, group, id, token string, ttl time.Duration) (dedup.State, error) {
	g.seen = append(g.seen, group)
	return g.Store.Claim(ctx, group, id, token, ttl)
}

// TestGroup: with no Config.Group the marks are kept under each message's
// consumer group; a Config.Group overrides it (groups that share marks); a
// message naming no group with no Config.Group fails with ErrConfig
// without running the handler.
func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, msg, want string
	}{
		{"derived", "", "orders", "orders"},
		{"shared", "orders-blue-green", "orders-green", "orders-blue-green"},
		{"none", "", "", ""},
	} {
		store := &groups{Store: newMemory(t)}
		d, err := dedup.New(dedup.Config{Store: store, Group: tc.cfg})
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		m := message("e1")
		m.Group = tc.msg
		err = d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error { ran++; return nil })).
			Handle(context.Background(), m)
		if tc.want == "" {
			if !errors.Is(err, dedup.ErrConfig) || ran != 0 || len(store.seen) != 0 {
				t.Errorf("%s: error %v, ran %d, claims %v; want ErrConfig and nothing run", tc.name, err, ran, store.seen)
			}
			continue
		}
		if err != nil || ran != 1 || len(store.seen) != 1 || store.seen[0] != tc.want {
			t.Errorf("%s: error %v, ran %d, claims in %v; want one run under %q", tc.name, err, ran, store.seen, tc.want)
		}
	}
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

// TestNoEventID: a message without an event ID is refused by default
// (a permanent error naming the record, the handler not run); a Config.Key
// that returns "" leaves the message to NoEventID, one that returns a key
// dedups on it.
func TestNoEventID(t *testing.T) {
	ran := 0
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { ran++; return nil })
	ctx := context.Background()
	d, _ := dedup.New(dedup.Config{Store: newMemory(t), Group: "g"})
	err := d.Middleware(h).Handle(ctx, message(""))
	if !errors.Is(err, dedup.ErrNoEventID) || !consumer.IsPermanent(err) || ran != 0 {
		t.Fatalf("error %v, %d runs; want a permanent ErrNoEventID, no run", err, ran)
	}
	for _, want := range []string{"topic t partition 1 offset 7", "lanes-event-id", "NoEventID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	noKey := func(*consumer.Message) string { return "" }
	d, _ = dedup.New(dedup.Config{Store: newMemory(t), Group: "g", Key: noKey})
	if err := d.Middleware(h).Handle(ctx, message("e1")); !errors.Is(err, dedup.ErrNoEventID) || ran != 0 {
		t.Fatalf("Key returned \"\": error %v, %d runs; want ErrNoEventID, no run", err, ran)
	}
	byValue := func(m *consumer.Message) string { return string(m.Record.Value) }
	d, _ = dedup.New(dedup.Config{Store: newMemory(t), Group: "g", Key: byValue})
	for range 2 {
		m := message("")
		m.Record.Value = []byte("order-7 created")
		if err := d.Middleware(h).Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); ran != 1 || st.Skipped != 1 || st.Refused != 0 {
		t.Fatalf("keyed by Config.Key: %d runs, stats %+v; want 1 run, 1 skipped", ran, st)
	}
}

// TestNoEventIDDeadLettered: through a consumer on an embedded broker, a
// record without an event ID goes to the dead-letter topic at its first
// attempt, as a permanent failure whose error says why; the handler never
// runs.
func TestNoEventIDDeadLettered(t *testing.T) {
	const topic, dlq = "no-ids", "no-ids-dlq"
	b, err := lanestest.NewBroker(1, topic, dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := b.Client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("order-7"), Value: []byte("created")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d, _ := dedup.New(dedup.Config{Store: newMemory(t), Group: "g"})
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: "g", Topics: []string{topic}, DeadLetterTopic: dlq,
		Middleware: []consumer.Middleware{d.Middleware}},
		consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			t.Error("the handler ran on a message without an event ID")
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var dead *kgo.Record
	for dead == nil && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { dead = r })
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if dead == nil {
		t.Fatalf("nothing dead-lettered: %v", ctx.Err())
	}
	header := func(k string) string { v, _ := eventid.Header(dead, k); return v }
	if r, a := header(consumer.HeaderDLQReason), header(consumer.HeaderDLQAttempts); r != string(consumer.ReasonPermanent) || a != "1" {
		t.Fatalf("dead-lettered with reason %q after %s attempts, want %q after 1", r, a, consumer.ReasonPermanent)
	}
	if e := header(consumer.HeaderDLQError); !strings.Contains(e, dedup.ErrNoEventID.Error()) || !strings.Contains(e, "topic no-ids partition 0 offset 0") {
		t.Fatalf("dead-letter error %q does not say the record has no event ID", e)
	}
	if st := d.Stats(); st.Refused != 1 || st.Ran != 0 {
		t.Fatalf("stats %+v: want 1 refused", st)
	}
}

// TestPositionKey: a record's position key is the same for a copy of the
// record as read again, and differs when any part a reused offset could
// change differs.
func TestPositionKey(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_000)
	base := func() *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: 3, Timestamp: ts, ProducerID: 9, ProducerEpoch: 1,
			Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}}
	}
	key := func(r *kgo.Record) string { return dedup.PositionKey(&consumer.Message{Record: r}) }
	want := key(base())
	if got := key(base()); got != want {
		t.Fatalf("the same record keyed %q and %q", want, got)
	}
	changes := map[string]func(r *kgo.Record){
		"topic":          func(r *kgo.Record) { r.Topic = "u" },
		"partition":      func(r *kgo.Record) { r.Partition = 1 },
		"offset":         func(r *kgo.Record) { r.Offset = 6 },
		"leader epoch":   func(r *kgo.Record) { r.LeaderEpoch = 4 },
		"timestamp":      func(r *kgo.Record) { r.Timestamp = ts.Add(time.Millisecond) },
		"producer ID":    func(r *kgo.Record) { r.ProducerID = 10 },
		"producer epoch": func(r *kgo.Record) { r.ProducerEpoch = 2 },
		"key":            func(r *kgo.Record) { r.Key = []byte("k2") },
		"nil key":        func(r *kgo.Record) { r.Key = nil },
		"value":          func(r *kgo.Record) { r.Value = []byte("v2") },
		"key into value": func(r *kgo.Record) { r.Key, r.Value = []byte(""), []byte("kv") },
		"header":         func(r *kgo.Record) { r.Headers[0].Value = []byte("2") },
		"no header":      func(r *kgo.Record) { r.Headers = nil },
	}
	for what, change := range changes {
		r := base()
		change(r)
		if key(r) == want {
			t.Errorf("a different %s: the same key %q", what, want)
		}
	}
}
