package consumer

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// A consumed topic deleted and made again while the consumer runs: an
// operator's delete and create, or a broker restarted without its data
// (as `lanes broker` is), on the same port with the topics made again.
// The topic comes back under a new ID; franz-go fails its fetches and
// commits with UNKNOWN_TOPIC_ID until it is purged and re-added. The
// consumer re-subscribes by itself: every message of the new topic is
// handled, once and in order per session; readiness names the topic while
// the member re-subscribes (a handler of the old topic still runs) and is
// ready again after; the fetch errors and failed commits meanwhile are
// logged at most once per logRepeatEvery. A dead-letter topic made again
// (the restarted broker) takes the next dead-letter copy.
//
// The quick form (-short) runs the restarted broker only, which makes the
// dead-letter topic again too (each takes about 11 s of session and
// metadata timers); make test-long runs both.
func TestTopicMadeAgain(t *testing.T) {
	for _, how := range longtest.Size(t, []string{"deleted and created", "broker restarted without its data"}, []string{"broker restarted without its data"}) {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) { testTopicMadeAgain(t, how != "deleted and created") })
	}
}

// recreatedPer is how many messages each session sends to each incarnation
// of the topic.
const recreatedPer = 4

func testTopicMadeAgain(t *testing.T, restart bool) {
	port := freePort(t)
	seed := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(3, "chats", "dlq"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cluster := seed()
	defer func() { cluster.Close() }()
	e := &env{t: t, c: cluster, addrs: cluster.ListenAddrs()}

	sessions := sessionNames(6)
	blocked := sessions[0] + "|" + strconv.Itoa(recreatedPer-1) // the old topic's last message of sessions[0]
	gate, started := make(chan struct{}), make(chan struct{})
	old := newRecorder(len(sessions)*recreatedPer-1, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == sessions[1]+"|0" {
			return Permanent(errors.New("dead-letter me")) // the dead-letter client learns the old dlq topic
		}
		if string(m.Record.Value) == blocked {
			close(started)
			select { // held past the recreation, so the re-subscription waits for it
			case <-gate:
			case <-ctx.Done():
			}
		}
		return nil
	})
	fresh := newRecorder(len(sessions)*recreatedPer, func(_ context.Context, m *Message) error {
		if string(m.Record.Value) == sessions[1]+"|1" {
			return Permanent(errors.New("dead-letter me")) // a dead-letter write to the new dlq topic
		}
		return nil
	})
	var cur atomic.Pointer[recorder]
	cur.Store(old)
	logs := newLogCapture()
	cfg := e.config("g-made-again", "chats")
	cfg.Logger = &logs.log
	cfg.RevokeTimeout = testTimeout
	c, err := New(cfg, HandlerFunc(func(ctx context.Context, m *Message) error { return cur.Load().Handle(ctx, m) }))
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	stop := start(t, c)
	e.produce("chats", sessions, recreatedPer)
	old.wait(t)
	<-started
	cur.Store(fresh)

	began := time.Now()
	if restart {
		cluster.Close()
		cluster = seed()
	} else {
		adm := kadm.NewClient(e.client())
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if _, err := adm.DeleteTopic(ctx, "chats"); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, "chats"); err != nil {
			t.Fatal(err)
		}
	}
	e.produce("chats", sessions, recreatedPer)
	if !restart {
		// The member still holds the old topic's partitions, a handler of
		// it running: the re-subscription waits for it. (A restarted broker
		// lost the group too: the member loses its partitions, and their
		// handlers are cancelled, before it can tell.)
		p.awaitReadyz("the topic named as made again", testTimeout, notReadyWith("topic chats was deleted and made again", "re-subscribing"))
	}
	close(gate)
	fresh.wait(t)
	checkOrder(t, fresh, []string{"chats"}, sessions, recreatedPer)
	dead := 2 // the old topic's and the new one's
	if restart {
		dead = 1 // the new cluster holds only the new one's
	}
	eventually(t, "dead-letter writes", func() bool { return c.Stats().DeadLettered == 2 })
	var vals []string
	for _, r := range readDLQ(t, e, dead) {
		vals = append(vals, string(r.Value))
	}
	if !slices.Contains(vals, sessions[1]+"|1") {
		t.Fatalf("dead-letter topic holds %q, want the failed message of the new topic", vals)
	}
	p.awaitReadyz("ready after re-subscribing", testTimeout, ready)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(began)
	if n := len(logs.lines("consumed topic deleted and made again")); n != 1 {
		t.Fatalf("%d warnings that the consumed topic was made again, want 1 (one re-subscription):\n%s", n, logs)
	}
	if restart && len(logs.lines("dead-letter topic deleted and made again")) != 1 {
		t.Fatalf("no warning that the dead-letter topic was made again:\n%s", logs)
	}
	for _, msg := range []string{"fetch error", "periodic commit failed"} {
		if n, max := len(logs.lines(msg)), 1+int(took/logRepeatEvery); n > max {
			t.Fatalf("%d %q lines in %v; want at most %d (one per %v):\n%s", n, msg, took, max, logRepeatEvery, logs)
		}
	}
}

// freePort returns a loopback port free a moment ago, for a broker that
// must come back on the same address.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestIDWatch: how the topic watch tells a topic made again from one it
// reads: the first ID a check sees is the one read under; a fetch failing
// under the ID the brokers name is no recreation (a new topic not yet known
// to every broker); a fetch failing under another ID is one, even before a
// check saw the old ID; after a re-subscription, fetches failing under the
// old ID (made before the purge) are ignored for topicRecheck.
func TestIDWatch(t *testing.T) {
	a, b, x := topicID{1}, topicID{2}, topicID{3}
	now := time.Now()
	w := newIDWatch([]string{"chats"}, "dlq")
	if got := w.compare(map[string]topicID{"chats": a, "dlq": x}, now); len(got) != 0 {
		t.Fatalf("first check: %v made again; want none", got)
	}
	w.fetchFailed("chats", a, now)
	w.fetchFailed("other", b, now) // not watched
	if got := w.compare(map[string]topicID{"chats": a, "dlq": x}, now); len(got) != 0 {
		t.Fatalf("a fetch failing under the current ID: %v made again; want none", got)
	}
	if got := w.compare(map[string]topicID{"chats": b, "dlq": b}, now); !slices.Equal(got, []string{"chats", "dlq"}) {
		t.Fatalf("both IDs changed: %v made again; want [chats dlq]", got)
	}
	if rs := w.reasons(); len(rs) != 2 || !strings.Contains(rs[0], "topic chats was deleted and made again (its ID changed from 01") ||
		!strings.Contains(rs[0], "re-subscribing") || !strings.HasPrefix(rs[1], "dead-letter topic dlq was deleted and made again") {
		t.Fatalf("reasons %q", rs)
	}
	w.fetchFailed("chats", a, now) // a poll made before the purge
	w.done("chats", now)
	w.done("dlq", now)
	if rs := w.reasons(); len(rs) != 0 {
		t.Fatalf("reasons after the re-subscription: %q", rs)
	}
	w.fetchFailed("chats", a, now.Add(time.Second))
	if got := w.compare(map[string]topicID{"chats": b, "dlq": b}, now.Add(time.Second)); len(got) != 0 {
		t.Fatalf("a fetch under the old ID just after the re-subscription: %v made again; want none", got)
	}
	w.fetchFailed("chats", a, now.Add(topicRecheck))
	if got := w.compare(map[string]topicID{"chats": b, "dlq": b}, now.Add(topicRecheck)); !slices.Equal(got, []string{"chats"}) {
		t.Fatalf("fetches under the old ID %v after the re-subscription: %v made again; want [chats]", topicRecheck, got)
	}

	late := newIDWatch([]string{"chats"}, "") // its first check after the recreation
	late.fetchFailed("chats", a, now)
	if got := late.compare(map[string]topicID{"chats": b}, now); !slices.Equal(got, []string{"chats"}) {
		t.Fatalf("a fetch under an ID the brokers no longer name: %v made again; want [chats]", got)
	}
	select {
	case <-late.kick:
	default:
		t.Fatal("a failed fetch did not ask for a check")
	}
}
