package consumer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// TestParkTopicChecked: a park topic that is missing, has another
// partition count than its source, or is compacted holds the partitions
// it serves (nothing of them is handled: a parked session's record could
// run out of order) with a Health reason saying what to fix.
func TestParkTopicChecked(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int32
		configs    map[string]*string
		want       string
	}{
		{"missing", 0, nil, "missing"},
		{"other partition count", 1, nil, "must be equal"},
		{"compacted", 2, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "compacted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2, "chats", "dlq")
			if tc.partitions > 0 {
				if _, err := kadm.NewClient(e.client()).CreateTopic(context.Background(), tc.partitions, 1, tc.configs, "chats.park"); err != nil {
					t.Fatal(err)
				}
			}
			e.produce("chats", sessionNames(4), 2)
			rec := newRecorder(8, nil)
			cfg := e.config("g-park-check", "chats")
			cfg.Park.Enabled = true
			cfg.CommitTimeout = time.Second // a missing topic is looked for again for twice this
			c, err := New(cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			eventually(t, "both partitions held", func() bool {
				held := 0
				for _, p := range c.Stats().Partitions {
					if strings.Contains(p.Park.Error, tc.want) {
						held++
					}
				}
				return held == 2
			})
			h := c.Health()
			if h.Ready || !strings.Contains(strings.Join(h.Reasons, "\n"), "chats/0 parked sessions unavailable") {
				t.Fatalf("health %+v; want not ready, naming chats/0", h)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.snapshot()); n != 0 {
				t.Fatalf("%d records handled on partitions without their parked sets", n)
			}
		})
	}
}

// TestParkAtOnce: a handler returning Park(err) parks its record on the
// first failure; the session's later records follow it to the park topic
// unhandled, the other sessions flow, and once the retry from the park
// topic succeeds the session runs on in order. The parked copy keeps the
// record's key, value and headers.
func TestParkAtOnce(t *testing.T) {
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	sessions := sessionNames(6)
	var recs []*kgo.Record
	for seq := range 5 {
		for _, s := range sessions {
			v := s + "|" + strconv.Itoa(seq)
			recs = append(recs, &kgo.Record{Topic: "chats", Key: []byte(s), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "lanes-event-id", Value: []byte("id-" + v)}}})
		}
	}
	if err := e.client().ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var parkedOnce atomic.Bool
	rec := newRecorder(30, func(ctx context.Context, m *Message) error {
		if s, seq := parseValue(m.Record.Value); s == sessions[2] && seq == 1 && parkedOnce.CompareAndSwap(false, true) {
			return Park(errors.New("its account service is down"))
		}
		return nil
	})
	cfg := e.config("g-park-now", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 5)
	if n := len(rec.snapshot()); n != 31 {
		t.Fatalf("%d handler calls; want 31 (30 messages, one parked at once and retried once)", n)
	}
	cl := e.client(kgo.ConsumeTopics("chats.park"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var copies []string
	for len(copies) < 4 { // seqs 1..4 of the session: parked, then forwarded
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("park topic: %d copies, want 4", len(copies))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if headerOf(r, parkwire.HeaderKind) == "record" {
				if string(r.Key) != sessions[2] || headerOf(r, "lanes-event-id") != "id-"+string(r.Value) || headerOf(r, parkwire.HeaderTopic) != "chats" {
					t.Errorf("park copy %q lost its key, event ID or provenance: %v", r.Value, r.Headers)
				}
				copies = append(copies, string(r.Value))
			}
		})
	}
	want := []string{sessions[2] + "|1", sessions[2] + "|2", sessions[2] + "|3", sessions[2] + "|4"}
	if !slices.Equal(copies, want) {
		t.Fatalf("park copies %q; want %q", copies, want)
	}
}

// TestParkRetryPermanent: a parked record whose retry fails permanently is
// dead-lettered at once (reason permanent) and its session goes on in
// order, as it would in the source partition.
func TestParkRetryPermanent(t *testing.T) {
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	sessions := sessionNames(4)
	e.produce("chats", sessions, 4)
	var calls atomic.Int32
	rec := newRecorder(16, func(ctx context.Context, m *Message) error {
		if s, seq := parseValue(m.Record.Value); s == sessions[1] && seq == 0 {
			if calls.Add(1) == 1 {
				return Park(errors.New("down"))
			}
			return Permanent(errors.New("poison after all"))
		}
		return nil
	})
	cfg := e.config("g-park-permanent", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "session unparked", func() bool {
		for _, p := range c.Stats().Partitions {
			if p.Park.Sessions > 0 {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 4)
	if n := c.Stats().DeadLetteredByReason[ReasonPermanent]; n != 1 {
		t.Fatalf("dead-lettered as permanent: %d; want 1", n)
	}
}

// TestInspectParked: InspectParked lists a parked session with its parked
// records' source offsets, as the group would rebuild it.
func TestInspectParked(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	sessions := sessionNames(3)
	e.produce("chats", sessions, 3) // offsets: s0|0 s1|0 s2|0 s0|1 …
	rec := newRecorder(6, func(ctx context.Context, m *Message) error {
		if s, _ := parseValue(m.Record.Value); s == sessions[1] {
			return Park(errors.New("down"))
		}
		return nil
	})
	c, stop := startDueByHand(t, e, "g-park-inspect", rec, nil)
	eventually(t, "session parked with its three records", func() bool {
		st := c.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].Park.Records == 3
	})
	var got []ParkedSession
	var err error
	eventually(t, "the parked session in a commit's park position", func() bool { // InspectParked reads what the group committed
		got, err = InspectParked(context.Background(), ParkTarget{Brokers: e.addrs, Group: "g-park-inspect", Topic: "chats"})
		return err != nil || len(got) > 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Session != sessions[1] || !slices.Equal(got[0].Offsets, []int64{1, 4, 7}) || got[0].Held || got[0].Since.IsZero() {
		t.Fatalf("InspectParked: %+v; want %s with offsets 1, 4, 7", got, sessions[1])
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestParkDrainsWithoutTicks: once a parked session's retry succeeds, its
// next parked records are retried one after the other at once, not one per
// tick of the park loop (which would drain a session slower than a steady
// producer fills it, so that it never unparks). The park loop queues the
// first retry only.
func TestParkDrainsWithoutTicks(t *testing.T) {
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	const n = 30
	sessions := sessionNames(3)
	e.produce("chats", sessions, n)
	var parked atomic.Bool
	rec := newRecorder(n*len(sessions), func(ctx context.Context, m *Message) error {
		if s, seq := parseValue(m.Record.Value); s == sessions[1] && seq == 0 && parked.CompareAndSwap(false, true) {
			return Park(errors.New("its dependency is down"))
		}
		return nil
	})
	cfg := e.config("g-park-drain", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: 200 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, n)
	if q := c.parkLoopQueued.Load(); q != 1 {
		t.Fatalf("the park loop queued %d retries; want 1 (the first; the session's other parked records follow at once)", q)
	}
}
