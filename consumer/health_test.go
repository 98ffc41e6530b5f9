package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthNotRunning(t *testing.T) {
	c := unstarted(t, nil)
	h := c.Health()
	if h.Live || h.Ready || !strings.Contains(strings.Join(h.Reasons, "\n"), "not running") {
		t.Fatalf("health before Run: %+v", h)
	}
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	if code, _ := get(t, srv, "/livez"); code != http.StatusServiceUnavailable {
		t.Fatalf("livez before Run: %d", code)
	}
}

// TestHealthStalled: a ready consumer turns not ready while a record stalls
// its partition; the reason, Stats and the debug endpoint name the
// partition, the offset and the session holding it, and the session is the
// hottest one. Once the handler returns, readyz answers ok again.
func TestHealthStalled(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	release := make(chan struct{})
	h := newValueLog(func(ctx context.Context, v string) error {
		if v == "a|0" {
			<-release
		}
		return nil
	}, "b|0")
	cfg := e.config("g-health", "chats")
	cfg.StallTimeout = 100 * time.Millisecond
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	eventually(t, "ready", func() bool { return c.Health().Ready })
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	if code, body := get(t, srv, "/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("readyz: %d %q", code, body)
	}
	e.produceValues("chats", "a|0", "a|1", "a|2", "b|0")
	h.await(t, "b|0")
	eventually(t, "not ready", func() bool { return !c.Health().Ready })
	code, body := get(t, srv, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `chats/0 stalled`) ||
		!strings.Contains(body, `held by offset 0, session "a"`) {
		t.Fatalf("readyz while stalled: %d %q", code, body)
	}
	if code, _ := get(t, srv, "/livez"); code != http.StatusOK {
		t.Fatalf("livez while stalled: %d", code)
	}
	_, body = get(t, srv, "/debug/lanes")
	var dbg struct {
		Health Health
		Stats  Stats
	}
	if err := json.Unmarshal([]byte(body), &dbg); err != nil {
		t.Fatalf("debug/lanes: %v\n%s", err, body)
	}
	ps := dbg.Stats.Partitions[0]
	if dbg.Health.Ready || ps.HeldAt != 0 || ps.HeldBySession != "a" {
		t.Fatalf("debug/lanes: ready %v, held at %d by %q", dbg.Health.Ready, ps.HeldAt, ps.HeldBySession)
	}
	if hot := dbg.Stats.HotSessions; len(hot) == 0 || hot[0].Session != "a" || hot[0].Depth != 3 || !hot[0].Running {
		t.Fatalf("hot sessions %+v: want a first, 3 deep, running", hot)
	}
	unblock()
	awaitReadyz(t, srv, "ready once the handler returned", ready)
}

// TestHealthCommitsFailing: while commit requests fail (the connection is
// dropped: every partition of the request failed) readyz answers 503 naming
// the partition and the error; once a commit succeeds it answers ok again.
func TestHealthCommitsFailing(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	var failing atomic.Bool
	e.c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if failing.Load() {
			return nil, errors.New("injected: connection dropped"), true
		}
		return nil, nil, false
	})
	rec := newRecorder(2, nil)
	c, err := New(e.config("g-health-commit", "chats"), rec)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	e.produceValues("chats", "a|0")
	awaitReadyz(t, srv, "ready", ready)
	failing.Store(true)
	e.produceValues("chats", "a|1") // moves the watermark: a commit is due
	awaitReadyz(t, srv, "commits reported failing", notReadyWith("commits failing for chats/0 since", "consumer: commit failed"))
	failing.Store(false)
	awaitReadyz(t, srv, "ready again", ready)
}
