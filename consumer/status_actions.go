package consumer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The status page's actions (Config.StatusActions, off by default): an
// operator releases a held session, or pauses or resumes one, from the
// page. Each is a POST that carries the page's token (a secret of this
// process that only a reader of the page has) and passes Go's
// cross-origin protection (a browser's request from another site is
// refused; the page may not be framed), and is logged with who asked.
// Each answers with a redirect back to the page (post, redirect, get),
// the outcome in its query. The token stops forged requests, not people:
// whoever can read the page can act, so the page belongs on a private
// port behind the service's own authentication (a proxy that sets the
// user it vouches for, which the log then names).

// statusToken is the anti-forgery token of this process's status page.
func newStatusToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// statusActions is the handler of the page's POSTs.
func (c *Consumer) statusActions() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /status/release", c.actRelease)
	mux.HandleFunc("POST /status/pause", c.actPause)
	mux.HandleFunc("POST /status/resume", c.actResume)
	var cop http.CrossOriginProtection
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10) // a form of a few fields
		switch {
		case !c.cfg.StatusActions:
			http.Error(w, "status page actions are off: set Config.StatusActions to turn them on", http.StatusForbidden)
		case cop.Check(r) != nil:
			c.logAction(r, "refused: a cross-origin request", "")
			http.Error(w, "refused: a request from another site", http.StatusForbidden)
		case subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(c.statusToken)) != 1:
			c.logAction(r, "refused: no valid token", "")
			http.Error(w, "refused: the page's token is missing or wrong: reload the status page and try again", http.StatusForbidden)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// actRelease releases a held session of an owned partition.
func (c *Consumer) actRelease(w http.ResponseWriter, r *http.Request) {
	topic, session := r.PostFormValue("topic"), r.PostFormValue("session")
	part, err := strconv.ParseInt(r.PostFormValue("partition"), 10, 32)
	what := fmt.Sprintf("release held session %q on %s/%s", session, topic, r.PostFormValue("partition"))
	if lane := r.PostFormValue("lane"); lane != "" && err == nil { // the parked set's own key: a keyless lane's is not its shown name
		var raw []byte
		if raw, err = hex.DecodeString(lane); err == nil {
			session = string(raw)
		}
	}
	if err != nil {
		c.done(w, r, what, fmt.Errorf("partition or lane: %w", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.CommitTimeout)
	defer cancel()
	if err = c.ReleaseParkedContext(ctx, topic, int32(part), session); errors.Is(err, ErrNotHeld) {
		err = fmt.Errorf("not held on this member (released already, or its partition moved): reload the page")
	}
	c.done(w, r, what, err)
}

// actPause pauses a session (Config.Control).
func (c *Consumer) actPause(w http.ResponseWriter, r *http.Request) {
	topic, session, reason := r.PostFormValue("topic"), r.PostFormValue("session"), r.PostFormValue("reason")
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.CommitTimeout)
	defer cancel()
	_, err := c.controlAs(ctx, actor(r), func(ct ControlTarget) (ControlledSession, error) {
		return PauseSession(ctx, ct, topic, session, reason)
	})
	c.done(w, r, fmt.Sprintf("pause session %q of %s (%s)", session, topic, reason), err)
}

// actResume resumes a paused session (Config.Control).
func (c *Consumer) actResume(w http.ResponseWriter, r *http.Request) {
	topic, session := r.PostFormValue("topic"), r.PostFormValue("session")
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.CommitTimeout)
	defer cancel()
	_, err := c.controlAs(ctx, actor(r), func(ct ControlTarget) (ControlledSession, error) {
		return ResumeSession(ctx, ct, topic, session)
	})
	c.done(w, r, fmt.Sprintf("resume session %q of %s", session, topic), err)
}

// done logs an action's outcome and sends the browser back to the page.
func (c *Consumer) done(w http.ResponseWriter, r *http.Request, what string, err error) {
	outcome := "done"
	if err != nil {
		outcome = "failed: " + err.Error()
	}
	c.logAction(r, outcome, what)
	// Relative, as the browser sent it: http.Redirect would resolve it
	// against the path a StripPrefix in front of the handler left.
	w.Header().Set("Location", "../status?did="+url.QueryEscape(what+": "+outcome))
	w.WriteHeader(http.StatusSeeOther)
}

// logAction logs an action asked from the status page: what, its outcome
// and who asked.
func (c *Consumer) logAction(r *http.Request, outcome, what string) {
	c.log().Warn().Str("action", what).Str("outcome", outcome).Str("by", actor(r)).Str("remote", r.RemoteAddr).
		Time("at", time.Now()).Msg("status page action")
}

// actor names who asked: the user a proxy in front vouches for (basic
// auth, X-Forwarded-User), else the address the request came from.
func actor(r *http.Request) string {
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u + " (status page)"
	}
	if u := r.Header.Get("X-Forwarded-User"); u != "" {
		return u + " (status page)"
	}
	return r.RemoteAddr + " (status page)"
}
