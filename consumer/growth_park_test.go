package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/hashring"
)

// TestGrowthParkedSession: a session is parked on its partition (its
// backend is down) when the topic grows from 2 to 4 partitions and its
// next records are placed on another partition. Those wait, then are
// parked on their new partition behind the records parked on the old one
// (MovedParked), and are retried only once those are done: the session's
// records run in order, none while an older one is parked, and none is
// lost. A moved session that is not parked runs as usual meanwhile.
// (Before, a parked record counted as handled for the move: the new
// records ran at once, ahead of the parked ones.)
func TestGrowthParkedSession(t *testing.T) {
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	pl2 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 2}
	pl4 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 4}
	var stuck, free string
	for _, s := range moved(sessionNames(200), pl2, 2, 4) {
		switch {
		case stuck == "":
			stuck = s
		case free == "":
			free = s
		}
	}
	var down atomic.Bool
	down.Store(true)
	var early atomic.Value // a newer record of stuck that ran while an older one was parked
	rec := newRecorder(12, func(_ context.Context, m *Message) error {
		s, seq := parseValue(m.Record.Value)
		if s != stuck {
			return nil
		}
		if seq >= 3 && down.Load() {
			early.CompareAndSwap(nil, fmt.Sprintf("record %d on partition %d", seq, m.Record.Partition))
		}
		if seq < 3 && down.Load() {
			return errors.New("its backend is down")
		}
		return nil
	})
	cfg := e.config("g", "chats")
	cfg.Park = ParkPolicy{Enabled: true, AfterAttempts: 1, Delay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond, MaxAttempts: 100_000} // retried until the test lets it succeed
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produceStamped("chats", []string{stuck, free}, 0, 3, pl2)
	waitFor(t, "the stuck session parked with its 3 records", func() bool { return parkedRecords(c) == 3 },
		func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })
	e.grow("chats.park", 4)
	e.grow("chats", 4)
	waitFor(t, "the new partitions assigned", func() bool { return len(c.Stats().Partitions) == 4 }, nil)
	e.produceStamped("chats", []string{stuck, free}, 3, 6, pl4)
	waitFor(t, "the moved session parked behind its old records", func() bool { return c.Stats().MovedParked == 1 },
		func() string { return fmt.Sprintf("%+v; parked %d", c.Stats().Growing, parkedRecords(c)) })
	waitFor(t, "the free session's 6 records handled", func() bool { return callsOf(rec, free, true) == 6 }, nil)
	failed := callsOf(rec, stuck, false)
	waitFor(t, "five more failed retries of the parked head", func() bool { return callsOf(rec, stuck, false) >= failed+5 }, nil) // the moved head is due meanwhile too
	if v := early.Load(); v != nil {
		t.Fatalf("session %s: %s ran while its older records were parked", stuck, v)
	}
	down.Store(false)
	waitFor(t, "the stuck session's 6 records handled", func() bool { return callsOf(rec, stuck, true) == 6 }, func() string {
		return fmt.Sprintf("calls %+v; growing %+v; partitions %+v", rec.snapshot(), c.Stats().Growing, c.Stats().Partitions)
	})
	finishUnparked(t, c, rec, stop)
	if v := early.Load(); v != nil {
		t.Fatalf("session %s: %s ran while its older records were parked", stuck, v)
	}
	for _, s := range []string{stuck, free} {
		var seqs []int
		for _, cl := range rec.snapshot() {
			if cl.session == s && cl.err == nil {
				seqs = append(seqs, cl.seq)
			}
		}
		if fmt.Sprint(seqs) != "[0 1 2 3 4 5]" {
			t.Fatalf("session %s handled %v; want 0 to 5 in order, once each", s, seqs)
		}
	}
	if len(rec.overlaps) > 0 {
		t.Fatalf("overlapping calls: %v", rec.overlaps)
	}
}

// callsOf counts rec's calls of session s that succeeded (ok) or failed.
func callsOf(rec *recorder, s string, ok bool) int {
	n := 0
	for _, cl := range rec.snapshot() {
		if cl.session == s && (cl.err == nil) == ok {
			n++
		}
	}
	return n
}
