package consumer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStatusPage: the status page is served as HTML next to livez and
// readyz, names the group and each owned partition with its committed
// offset, escapes what it shows (a session name is a record's key), and
// loads nothing from elsewhere (no script, no outside asset).
func TestStatusPage(t *testing.T) {
	e := newEnv(t, 2, "chats", "dlq")
	e.produce("chats", []string{"<script>alert(1)</script>", "chat-0001"}, 3)
	rec := newRecorder(6, nil)
	cfg := e.config("g-status", "chats")
	cfg.Control = ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "both partitions committed", func() bool {
		st := c.Stats()
		return len(st.Partitions) == 2 && st.Partitions[0].Committed >= 0 && st.Partitions[1].Committed >= 0 &&
			st.Partitions[0].Committed+st.Partitions[1].Committed == 6
	})
	srv := httptest.NewServer(http.StripPrefix("/lanes", c.HealthHandler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/lanes/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET status: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`<code id="group">g-status</code>`, `data-partition="chats/0"`, `data-partition="chats/1"`, `http-equiv="refresh"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(page) {
		t.Fatalf("the page has a script or loads something from elsewhere:\n%s", page)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
