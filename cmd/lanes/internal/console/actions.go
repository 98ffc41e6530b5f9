package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/dlq"
	"github.com/lanesdev/lanes/consumer"
)

// The group view's actions (--actions, off by default): release a held
// session, pause or resume a session, replay a selection of the dead
// letters. Each is a POST carrying the page's token (a random secret of
// this process, in its forms) through net/http's CrossOriginProtection,
// logged with who asked, and answered with a redirect back to the page.
// The token stops forged requests, not people: put the console behind
// your own authentication, on a private address.

// actions are the console's actions and the one replay that may run.
type actions struct {
	o     options
	token string
	log   *slog.Logger

	mu     sync.Mutex
	replay *replayJob // the last replay started; nil before any
	wg     sync.WaitGroup
	stop   context.CancelFunc
	ctx    context.Context
}

// replayJob is a replay started from the page: its selection, its output
// so far, and how it ended.
type replayJob struct {
	what    string
	started time.Time
	out     syncBuffer
	done    bool
	err     error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newActions(o options) *actions {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	ctx, cancel := context.WithCancel(context.Background())
	return &actions{o: o, token: hex.EncodeToString(b), log: slog.Default(), ctx: ctx, stop: cancel}
}

// close stops a replay under way (it keeps its progress) and waits for it.
func (a *actions) close() {
	a.stop()
	a.wg.Wait()
}

// handler serves the POSTs.
func (a *actions) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /release", a.release)
	mux.HandleFunc("POST /pause", a.pause)
	mux.HandleFunc("POST /resume", a.resume)
	mux.HandleFunc("POST /replay", a.startReplay)
	var cop http.CrossOriginProtection
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		switch {
		case cop.Check(r) != nil:
			a.logged(r, r.URL.Path, "refused: a cross-origin request")
			http.Error(w, "refused: a request from another site", http.StatusForbidden)
		case subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(a.token)) != 1:
			a.logged(r, r.URL.Path, "refused: no valid token")
			http.Error(w, "refused: the page's token is missing or wrong: reload the page and try again", http.StatusForbidden)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

func (a *actions) target() consumer.ControlTarget {
	return consumer.ControlTarget{Brokers: a.o.brokers, Group: a.o.group, Topic: a.o.ctlTopic, ClientOptions: a.o.opts}
}

func (a *actions) release(w http.ResponseWriter, r *http.Request) {
	topic, session := r.PostFormValue("topic"), r.PostFormValue("session")
	ctx, cancel := context.WithTimeout(r.Context(), a.o.timeout)
	defer cancel()
	_, err := consumer.ReleaseHeld(ctx, consumer.ParkTarget{Brokers: a.o.brokers, Group: a.o.group, Topic: topic, TopicSuffix: a.o.parkSuffix, ClientOptions: a.o.opts}, session)
	a.done(w, r, fmt.Sprintf("release held session %q of %s", session, topic), err)
}

func (a *actions) pause(w http.ResponseWriter, r *http.Request) {
	topic, session, reason := r.PostFormValue("topic"), r.PostFormValue("session"), r.PostFormValue("reason")
	ctx, cancel := context.WithTimeout(r.Context(), a.o.timeout)
	defer cancel()
	ct := a.target()
	ct.By = who(r)
	_, err := consumer.PauseSession(ctx, ct, topic, session, reason)
	a.done(w, r, fmt.Sprintf("pause session %q of %s (%s)", session, topic, reason), err)
}

func (a *actions) resume(w http.ResponseWriter, r *http.Request) {
	topic, session := r.PostFormValue("topic"), r.PostFormValue("session")
	ctx, cancel := context.WithTimeout(r.Context(), a.o.timeout)
	defer cancel()
	ct := a.target()
	ct.By = who(r)
	_, err := consumer.ResumeSession(ctx, ct, topic, session)
	a.done(w, r, fmt.Sprintf("resume session %q of %s", session, topic), err)
}

// startReplay starts a replay of the dead letters of a reason and/or a
// session, at most rate a second; one at a time.
func (a *actions) startReplay(w http.ResponseWriter, r *http.Request) {
	var sel dlq.Selection
	if v := r.PostFormValue("reason"); v != "" {
		sel.Reasons = []string{v}
	}
	if v := r.PostFormValue("session"); v != "" {
		sel.Sessions = []string{v}
	}
	perSecond, err := strconv.ParseFloat(r.PostFormValue("rate"), 64)
	what := fmt.Sprintf("replay of %s (reason %q, session %q) at %s/s", a.o.dlq, r.PostFormValue("reason"), r.PostFormValue("session"), r.PostFormValue("rate"))
	switch {
	case a.o.dlq == "":
		a.done(w, r, what, fmt.Errorf("no dead-letter topic: start lanes console with --dlq"))
		return
	case err != nil:
		a.done(w, r, what, fmt.Errorf("rate %q: want a number of records a second above 0", r.PostFormValue("rate")))
		return
	}
	if _, err := dlq.RateGap("rate", perSecond); err != nil { // not above 0, NaN, infinite, or too low for a time.Duration gap
		a.done(w, r, what, err)
		return
	}
	a.mu.Lock()
	if a.replay != nil && !a.replay.done {
		a.mu.Unlock()
		a.done(w, r, what, fmt.Errorf("a replay is under way: %s", a.replay.what))
		return
	}
	job := &replayJob{what: what, started: time.Now()}
	a.replay = job
	a.wg.Add(1)
	a.mu.Unlock()
	go func() { // owned by a: close cancels and waits for it
		defer a.wg.Done()
		err := dlq.Replay(a.ctx, &job.out, a.o.brokers, a.o.dlq, a.o.opts, a.o.timeout, sel, perSecond)
		a.mu.Lock()
		job.done, job.err = true, err
		a.mu.Unlock()
		a.log.Warn("console action ended", "action", what, "error", err, "output", job.out.String())
	}()
	a.done(w, r, what+": started", nil)
}

// replayState is the page's line about the last replay.
func (a *actions) replayState() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.replay
	if j == nil {
		return ""
	}
	state := "under way"
	if j.done {
		state = "ended"
		if j.err != nil {
			state = "failed: " + j.err.Error()
		}
	}
	return fmt.Sprintf("%s, started %s: %s. %s", j.what, j.started.UTC().Format("15:04:05"), state, j.out.String())
}

// done logs an action's outcome and sends the browser back to the page.
func (a *actions) done(w http.ResponseWriter, r *http.Request, what string, err error) {
	outcome := "done"
	if err != nil {
		outcome = "failed: " + err.Error()
	}
	a.logged(r, what, outcome)
	w.Header().Set("Location", "./?did="+url.QueryEscape(what+": "+outcome))
	w.WriteHeader(http.StatusSeeOther)
}

func (a *actions) logged(r *http.Request, what, outcome string) {
	a.log.Warn("console action", "group", a.o.group, "action", what, "outcome", outcome, "by", who(r), "remote", r.RemoteAddr)
}

// who names who asked: the user a proxy in front vouches for (basic
// auth, X-Forwarded-User), else the address the request came from.
func who(r *http.Request) string {
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u + " (lanes console)"
	}
	if u := r.Header.Get("X-Forwarded-User"); u != "" {
		return u + " (lanes console)"
	}
	return r.RemoteAddr + " (lanes console)"
}
