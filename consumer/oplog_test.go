package consumer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCompactPartitions(t *testing.T) {
	for _, c := range []struct {
		in   map[string][]int32
		want string
	}{
		{map[string][]int32{}, ""},
		{map[string][]int32{"chats": {3, 0, 1, 2, 7}}, "chats[0-3,7]"},
		{map[string][]int32{"orders": {1}, "chats": {5, 9, 8, 10, 2}, "none": {}}, "chats[2,5,8-10] orders[1]"},
	} {
		if got := compactPartitions(c.in); got != c.want {
			t.Errorf("compactPartitions(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// durationField reports whether line m's field k is a duration string
// equal to want ("30s", not zerolog's default 30000 milliseconds).
func durationField(m map[string]any, k string, want time.Duration) bool {
	s, ok := m[k].(string)
	d, err := time.ParseDuration(s)
	return ok && err == nil && (want < 0 || d == want)
}

// TestAssignRevokeLogged: a member logs one INFO line per assignment and
// per revoke, naming the group and the partitions compactly, and one when
// its shutdown begins and ends; durations as duration strings.
func TestAssignRevokeLogged(t *testing.T) {
	e := newEnv(t, 4, "chats", "dlq")
	logs := newLogCapture()
	cfg := e.config("g-oplog", "chats")
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.HeartbeatInterval(100*time.Millisecond))
	cfg.Logger = &logs.log
	a, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	eventually(t, "the assignment line", func() bool { return len(logs.lines("partitions assigned")) > 0 })
	if l := logs.lines("partitions assigned"); len(l) != 1 || l[0]["level"] != "info" || l[0]["partitions"] != "chats[0-3]" ||
		l[0]["count"] != 4.0 || l[0]["group"] != "g-oplog" {
		t.Fatalf("assignment lines %v: want one info line naming chats[0-3]", l)
	}

	bcfg := cfg
	bcfg.Logger = nil // to slog.Default(): discarded
	b, err := New(bcfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	stopB := start(t, b)
	eventually(t, "the revoke line", func() bool { return len(logs.lines("partitions revoked")) > 0 })
	l := logs.lines("partitions revoked")[0]
	if l["level"] != "info" || l["count"] != 2.0 || len(l["partitions"].(string)) < len("chats[0,1]") ||
		!durationField(l, "revoke_timeout", DefaultRevokeTimeout) {
		t.Fatalf("revoke line %v: want info, two partitions, revoke_timeout as a duration", l)
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	begin, end := logs.lines("shutdown: fetching stopped"), logs.lines("shutdown: done")
	if len(begin) != 1 || begin[0]["level"] != "info" || !durationField(begin[0], "shutdown_timeout", DefaultShutdownTimeout) ||
		!durationField(begin[0], "returns_within", DefaultShutdownTimeout+DefaultCommitTimeout+DefaultLeaveTimeout) {
		t.Fatalf("shutdown lines %v: want one at info with its timeouts as durations", begin)
	}
	if len(end) != 1 || end[0]["level"] != "info" || !durationField(end[0], "took", -1) {
		t.Fatalf("end of shutdown lines %v: want one at info with how long it took", end)
	}
}

// TestShutdownLogged: Ctrl-C during a slow handler is answered at once by
// a line saying what the shutdown waits for and for how long; when
// ShutdownTimeout passes with the handler still running, a warning names
// its partition; the last line says how it ended.
func TestShutdownLogged(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"chat-1"}, 1)
	logs := newLogCapture()
	started, release := make(chan struct{}), make(chan struct{})
	cfg := e.config("g-shutdown-log", "chats")
	cfg.Logger, cfg.ShutdownTimeout = &logs.log, 100*time.Millisecond
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		close(started)
		<-release // ignores its context
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, "the shutdown's first line", func() bool { return len(logs.lines("shutdown: fetching stopped")) > 0 })
	if l := logs.lines("shutdown: fetching stopped")[0]; l["level"] != "info" || l["running"] != 1.0 || l["partitions"] != 1.0 ||
		!durationField(l, "shutdown_timeout", 100*time.Millisecond) {
		t.Fatalf("shutdown line %v: want info, one handler running, shutdown_timeout 100ms", l)
	}
	eventually(t, "the warning at ShutdownTimeout", func() bool { return len(logs.lines("handlers still running after ShutdownTimeout")) > 0 })
	if l := logs.lines("handlers still running after ShutdownTimeout")[0]; l["level"] != "warn" || l["partitions"] != "chats[0]" || l["running"] != 1.0 {
		t.Fatalf("warning %v: want warn naming chats[0] and one handler", l)
	}
	close(release)
	if err := <-stopped; !errors.Is(err, ErrUnfinished) {
		t.Fatalf("Run: %v; want ErrUnfinished", err)
	}
	if l := logs.lines("shutdown: done"); len(l) != 1 || l[0]["level"] != "warn" || l[0]["error"] == nil {
		t.Fatalf("end lines %v: want one warning with Run's error", l)
	}
}

// TestUnparkLogged: a parked session whose parked records are all done
// is logged as unparked, once, naming its partition and session.
func TestUnparkLogged(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	e.produceValues("chats", "s|0", "s|1")
	var failures atomic.Int32
	h := HandlerFunc(func(_ context.Context, m *Message) error {
		if string(m.Record.Value) == "s|0" && failures.Add(1) <= 3 { // twice in its lane, once from the park topic
			return errors.New("its backend is down")
		}
		return nil
	})
	logs := newLogCapture()
	cfg := e.config("g-unpark-log", "chats")
	cfg.Logger = &logs.log
	cfg.Park = ParkPolicy{Enabled: true, AfterAttempts: 2, MaxAttempts: 10, Delay: 10 * time.Millisecond}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the unpark line", func() bool { return len(logs.lines("session unparked")) > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	l := logs.lines("session unparked")
	if len(l) != 1 || l[0]["level"] != "info" || l[0]["session"] != "s" || l[0]["topic"] != "chats" || l[0]["through_offset"] != 1.0 {
		t.Fatalf("unpark lines %v: want one at info naming chats, session s, through offset 1", l)
	}
}
