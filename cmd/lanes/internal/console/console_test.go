package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadArgs: a missing flag is named.
func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "g"}, "--brokers is required"},
		{[]string{"--brokers", "127.0.0.1:1"}, "--group is required"},
		{[]string{"--brokers", "127.0.0.1:1", "--group", "g", "--timeout", "0s"}, "--timeout 0s"},
	} {
		err := Run(context.Background(), tc.args, os.Stdout, os.Stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestReplayRateRejected: the console's replay form refuses a rate that is
// not a number of records a second above 0 (NaN or Inf would mean no cap)
// or so low that the gap between two records overflows a time.Duration,
// naming the field, and starts no replay.
func TestReplayRateRejected(t *testing.T) {
	a := newActions(options{brokers: []string{"127.0.0.1:1"}, group: "g", dlq: "chats-dlq", timeout: time.Second})
	defer a.close()
	h := a.handler()
	for _, tc := range []struct{ rate, want string }{
		{"x", `rate "x": want a number of records a second above 0`},
		{"0", "rate 0: want a number of records a second above 0"},
		{"-1", "rate -1: want a number of records a second above 0"},
		{"NaN", "rate NaN: want a number of records a second above 0"},
		{"Inf", "rate +Inf: want a number of records a second above 0"},
		{"1e-11", "rate 1e-11: want at least 1.1e-10 records a second"},
	} {
		form := url.Values{"token": {a.token}, "rate": {tc.rate}}
		req := httptest.NewRequest(http.MethodPost, "/replay", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		loc, _ := url.Parse(w.Header().Get("Location"))
		if did := loc.Query().Get("did"); w.Code != http.StatusSeeOther || !strings.Contains(did, "failed: "+tc.want) {
			t.Errorf("rate %q: %d %q, want a failure with %q", tc.rate, w.Code, did, tc.want)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.replay != nil {
		t.Errorf("a replay started: %s", a.replay.what)
	}
}

// TestGroupViewInBrowser: two members of a group on the embedded broker,
// a held session (parked), a dead-lettered record and a paused session;
// the group's page, loaded in headless Chromium, shows both members, each
// partition with its owner and lag, the held session, the paused one and
// the dead letters by reason.
func TestGroupViewInBrowser(t *testing.T) {
	path := chromiumPath(t)
	b, err := lanestest.NewBroker(4, "chats", "chats.park", "chats-dlq")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const group, held, poison, paused = "console-group", "chat-held", "chat-poison", "chat-paused"
	ct := consumer.ControlTarget{Brokers: b.Addrs(), Group: group, By: "ops"}
	if _, err := consumer.PauseSession(ctx, ct, "chats", paused, "moderation"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("chats"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 3 {
		for _, s := range []string{held, poison, paused, "chat-a", "chat-b", "chat-c"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(s), Value: []byte(fmt.Sprintf("%s|%d", s, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var handled atomic.Int64
	h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		switch {
		case m.SessionID == held:
			return errors.New("its backend is down")
		case m.SessionID == poison && strings.HasSuffix(string(m.Record.Value), "|1"):
			return consumer.Permanent(errors.New("cannot parse it"))
		}
		handled.Add(1)
		return nil
	})
	var members []*consumer.Consumer
	for range 2 {
		c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: group, Topics: []string{"chats"}, DeadLetterTopic: "chats-dlq",
			CommitInterval: 50 * time.Millisecond, Retry: consumer.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond},
			Control: consumer.ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond},
			Park:    consumer.ParkPolicy{Enabled: true, AfterAttempts: 1, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 1}}, h)
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		t.Cleanup(func() { stop(); <-done })
		members = append(members, c)
	}
	waitFor(t, "both members owning partitions, the held session held, the others handled", func() bool {
		heldN, owned := 0, 0
		for _, c := range members {
			st := c.Stats()
			owned += min(len(st.Partitions), 1)
			for _, p := range st.Partitions {
				heldN += p.Park.Held
			}
		}
		return owned == 2 && heldN == 1 && handled.Load() == 3*3+2 // chat-a,b,c and poison's 0 and 2
	})
	waitFor(t, "the held session's park position committed", func() bool {
		ps, err := consumer.InspectParked(ctx, consumer.ParkTarget{Brokers: b.Addrs(), Group: group, Topic: "chats"})
		return err == nil && len(ps) == 2 // held, and the paused one parked
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(sctx, ln, options{brokers: b.Addrs(), group: group, dlq: "chats-dlq", parkSuffix: ".park", ctlTopic: consumer.DefaultControlTopic, timeout: 30 * time.Second})
	}()
	defer func() { stopServe(); <-served }()

	bctx, closeBrowser := browser(t, path)
	defer closeBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+ln.Addr().String()+"/"), chromedp.WaitVisible("#partitions")); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	summary, membersT, parkedT, controlled, dlqT := text("#summary"), text("#members"), text("#parked"), text("#controlled"), text("#dlq")
	for _, check := range []struct{ what, got, want string }{
		{"the members", summary, "2 members"},
		{"the members' partitions", membersT, "chats/"},
		{"the held session", parkedT, held},
		{"its state", parkedT, "held"},
		{"the paused session", controlled, paused},
		{"the paused session's parked records", text(fmt.Sprintf(`#parked tr[data-session=%q]`, paused)), "paused"},
		{"who paused it and why", controlled, "moderation"},
		{"the dead letters by reason", dlqT, "permanent 1"},
		{"the held session's dead letter", dlqT, "park-exhausted 1"},
	} {
		if !strings.Contains(check.got, check.want) {
			t.Errorf("%s: the page shows %q, want it to contain %q", check.what, check.got, check.want)
		}
	}
	for p := range 4 {
		row := text(fmt.Sprintf(`#partitions tr[data-partition="chats/%d"]`, p))
		if !strings.Contains(row, "…") { // an owner's member ID
			t.Errorf("partition chats/%d shows no owner: %q", p, row)
		}
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{t.TempDir()}
	if os.Getenv("LANES_UPDATE_SCREENSHOTS") != "" {
		dirs = append(dirs, filepath.Join("..", "..", "..", "..", "docs", "images"))
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "console-group.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond (the brokers' and members' state has no signal of
// its own) until it holds, or fails after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsoleActionsInBrowser: with --actions, from the group's page in
// Chromium an operator resumes a paused session and releases a held one
// (their records then run), and replays the dead letters of a reason
// (the page shows the replay ended, one record sent). Without the token,
// or with actions off, a POST is refused.
func TestConsoleActionsInBrowser(t *testing.T) {
	path := chromiumPath(t)
	b, err := lanestest.NewBroker(2, "chats", "chats.park", "chats-dlq")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const group, held, poison, paused = "console-actions", "chat-held", "chat-poison", "chat-paused"
	if _, err := consumer.PauseSession(ctx, consumer.ControlTarget{Brokers: b.Addrs(), Group: group}, "chats", paused, "moderation"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("chats"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 2 {
		for _, s := range []string{held, poison, paused} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(s), Value: []byte(fmt.Sprintf("%s|%d", s, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	handled := map[string]int{}
	h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		switch {
		case m.SessionID == held && down.Load():
			return errors.New("its backend is down")
		case m.SessionID == poison && strings.HasSuffix(string(m.Record.Value), "|0"):
			return consumer.Permanent(errors.New("cannot parse it"))
		}
		mu.Lock()
		handled[m.SessionID]++
		mu.Unlock()
		return nil
	})
	count := func(s string) int { mu.Lock(); defer mu.Unlock(); return handled[s] }
	c, err := consumer.New(consumer.Config{Brokers: b.Addrs(), Group: group, Topics: []string{"chats"}, DeadLetterTopic: "chats-dlq",
		CommitInterval: 50 * time.Millisecond, Retry: consumer.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond},
		Control: consumer.ControlPolicy{Enabled: true, Interval: 20 * time.Millisecond},
		Park:    consumer.ParkPolicy{Enabled: true, AfterAttempts: 1, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 1}}, h)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(rctx) }()
	defer func() { stopRun(); <-ran }()
	waitFor(t, "the held session held and committed, the paused one parked", func() bool {
		ps, err := consumer.InspectParked(ctx, consumer.ParkTarget{Brokers: b.Addrs(), Group: group, Topic: "chats"})
		heldN := 0
		for _, p := range ps {
			if p.Held {
				heldN++
			}
		}
		return err == nil && heldN == 1 && len(ps) == 2 && count(poison) == 1
	})
	o := options{brokers: b.Addrs(), group: group, dlq: "chats-dlq", parkSuffix: ".park", ctlTopic: consumer.DefaultControlTopic, timeout: 30 * time.Second}
	for _, on := range []bool{false, true} {
		o.actions = on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sctx, stopServe := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- Serve(sctx, ln, o) }()
		base := "http://" + ln.Addr().String() + "/"
		resp, err := http.PostForm(base+"resume", url.Values{"topic": {"chats"}, "session": {paused}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a POST without the token (actions %v): %d, want 403", on, resp.StatusCode)
		}
		if on {
			browse(t, path, base, count, paused, held, &down)
		}
		stopServe()
		<-served
	}
}

// browse resumes paused and releases held from the page at base, and
// replays the permanent dead letters.
func browse(t *testing.T, path, base string, count func(string) int, paused, held string, down *atomic.Bool) {
	t.Helper()
	bctx, closeBrowser := browser(t, path)
	defer closeBrowser()
	click := func(button string) string {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(button), chromedp.Click(button), chromedp.WaitVisible("#did")); err != nil {
			t.Fatalf("%s: %v", button, err)
		}
		did, err := chromedp.Run(bctx, chromedp.Text("#did"))
		if err != nil {
			t.Fatal(err)
		}
		return did
	}
	if did := click(fmt.Sprintf(`#controlled tr[data-session=%q] button`, paused)); !strings.Contains(did, "resume session") || !strings.Contains(did, "done") {
		t.Fatalf("after resume: %q", did)
	}
	waitFor(t, "the resumed session's records handled", func() bool { return count(paused) == 2 })
	down.Store(false)
	if did := click(fmt.Sprintf(`#parked tr[data-session=%q] button`, held)); !strings.Contains(did, "release held session") || !strings.Contains(did, "done") {
		t.Fatalf("after release: %q", did)
	}
	waitFor(t, "the released session's later record handled", func() bool { return count(held) == 1 }) // its first was dead-lettered
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible("#replayform"),
		chromedp.SetValue(`#replayform select[name=reason]`, "permanent"), chromedp.Click("#replayform button"), chromedp.WaitVisible("#replay")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replay ended on the page", func() bool {
		if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible("#replay")); err != nil {
			return false
		}
		s, err := chromedp.Run(bctx, chromedp.Text("#replay"))
		return err == nil && strings.Contains(s, "ended") && strings.Contains(s, "1 record replayed")
	})
}

// chromiumPath is Debian's Chromium, or skips t when it is not installed
// (fails under CI=true: .ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not installed: .ci/run installs Debian's package")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	return path
}

// browser starts headless Chromium at path; the caller ends it with
// stop (before it stops a server the browser holds connections to).
func browser(t *testing.T, path string) (_ context.Context, stop func()) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	return bctx, func() { cancelB(); cancelAlloc() }
}
