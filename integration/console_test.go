package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// The member's status page (consumer.HealthHandler's status) in a real
// browser: headless Chromium from Debian's packages, driven from Go.

// browser starts headless Chromium for t, or skips t when it is not
// installed (fails under CI=true: .ci/run installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not installed: .ci/run installs Debian's package")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(tcancel)
	return tctx
}

// screenshot keeps the page's picture: in the test's temp dir, and in
// docs/images when LANES_UPDATE_SCREENSHOTS is set (how the docs' picture
// is made).
func screenshot(t *testing.T, png []byte, name string) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if os.Getenv("LANES_UPDATE_SCREENSHOTS") != "" {
		dirs = append(dirs, filepath.Join("..", "docs", "images"))
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusPageInBrowser: a member with a parked session, a held one, a
// dead-lettered record, a stalled attempt and a paused session; its status
// page, loaded in Chromium, shows each with the right numbers.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := browser(t)
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	const parked, held, poison, hung, paused = "chat-parked", "chat-held", "chat-poison", "chat-hung", "chat-paused"
	cfg := c.controlConfig("console", topic, dlq)
	cfg.StallTimeout, cfg.HandlerTimeout = 300*time.Millisecond, time.Hour
	cfg.Park = consumer.ParkPolicy{Enabled: true, AfterAttempts: 1, Delay: 50 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		MaxAttempts: 1, OnExhausted: consumer.ParkHold}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := consumer.PauseSession(cctx, c.control(cfg), topic, paused, "moderation"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	block := func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		session, seq, _ := strings.Cut(string(m.Record.Value), "|")
		switch {
		case session == parked && m.Attempt == 1:
			return errors.New("its backend is down") // parked at once (AfterAttempts 1)
		case session == parked:
			return block(ctx) // its retry from the park topic hangs: retrying
		case session == held:
			return errors.New("its backend is down for good") // its one park retry fails: held
		case session == poison && seq == "1":
			return consumer.Permanent(errors.New("cannot parse the message"))
		case session == hung:
			return block(ctx) // in its lane: its partition stalls
		}
		return nil
	})
	c.produce(t, topic, []string{parked, held, poison, hung, paused, "chat-ok"}, 3, l)
	m := startMember(t, "m1", cfg, l.Handler("m1", h))
	defer close(release)
	waitFor(t, "a parked, a held, a dead-lettered, a stalled and a paused session", time.Minute, func() bool {
		st := m.c.Stats()
		stalled, sessions, holds := false, 0, 0
		for _, p := range st.Partitions {
			stalled = stalled || p.Stalled
			sessions, holds = sessions+p.Park.Sessions, holds+p.Park.Held
		}
		return st.DeadLetteredByReason[consumer.ReasonPermanent] == 1 && stalled && st.Control.PausedParked == 1 && sessions == 3 && holds == 1
	})
	srv := httptest.NewServer(http.StripPrefix("/lanes", m.c.HealthHandler()))
	defer srv.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/lanes/status"), chromedp.WaitVisible("#partitions")); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	parkedRow, heldRow := text(fmt.Sprintf(`#parked tr[data-session=%q]`, parked)), text(fmt.Sprintf(`#parked tr[data-session=%q]`, held))
	dlqText, partitions, hot, controlled := text("#dlq"), text("#partitions"), text("#hot"), text("#controlled")
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, png, "console-member.png")
	for _, check := range []struct{ what, got, want string }{
		{"the parked session", parkedRow, "retrying"},
		{"the parked session's records", parkedRow, "3"},
		{"the held session", heldRow, "held"},
		{"the dead letters by reason", dlqText, "permanent 1"},
		{"the stalled partition", partitions, "stalled"},
		{"the stalled attempt's session", hot, hung},
		{"the paused session", controlled, paused},
		{"the paused session's parked records", text(fmt.Sprintf(`#parked tr[data-session=%q]`, paused)), "paused"},
		{"who paused it, and why", controlled, "moderation"},
	} {
		if !strings.Contains(check.got, check.want) {
			t.Errorf("%s: the page shows %q, want it to contain %q", check.what, check.got, check.want)
		}
	}
}

// TestStatusReleaseInBrowser: with Config.StatusActions, a session held
// after its park budget is released from the status page in Chromium (its
// release button, a POST with the page's token): its records are handled
// next, in order, nothing lost; the page then says the release was done.
func TestStatusReleaseInBrowser(t *testing.T) {
	ctx := browser(t)
	c := newCluster(t)
	topic, dlq := c.parkTopics(t)
	l := lanestest.NewLedger()
	const held = "chat-held"
	cfg := c.parkConfig("console-release", topic, dlq, 1, consumer.ParkHold)
	cfg.StatusActions = true
	var down atomic.Bool
	down.Store(true)
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if strings.HasPrefix(string(m.Record.Value), held+"|") && down.Load() {
			return errors.New("its backend is down")
		}
		return nil
	})
	sessions := []string{held, "chat-a", "chat-b"}
	start := time.Now()
	c.produce(t, topic, sessions, 5, l)
	m := startMember(t, "m1", cfg, l.Handler("m1", h))
	waitFor(t, "the session held, the others handled", time.Minute, func() bool {
		holds := 0
		for _, p := range m.c.Stats().Partitions {
			holds += p.Park.Held
		}
		return holds == 1 && l.Accounted() >= 10 // the others' 10 (the held one's first is dead-lettered: read below)
	})
	down.Store(false) // its backend is back: an operator releases it
	srv := httptest.NewServer(http.StripPrefix("/lanes", m.c.HealthHandler()))
	defer srv.Close()
	button := fmt.Sprintf(`#parked tr[data-session=%q] button`, held)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/lanes/status"), chromedp.WaitVisible(button)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(button), chromedp.WaitVisible("#did")); err != nil {
		t.Fatal(err)
	}
	did, err := chromedp.Run(ctx, chromedp.Text("#did"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(did, "release held session") || !strings.Contains(did, "done") {
		t.Fatalf("the page after the release says %q", did)
	}
	waitFinished(t, l, len(sessions)*5-1, time.Minute) // all but the held one's first, dead-lettered when its budget was spent
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.readDLQ(t, dlq, l)); n != 1 {
		t.Fatalf("%d dead letters; want the held session's first record", n)
	}
	assertClean(t, c, l.Report(), time.Since(start), false)
}
