package consumer

import (
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// The member's status page (GET status on HealthHandler): what Stats and
// Health say, as one plain HTML page an operator reads in a browser,
// server-rendered, with no script and no outside asset; it refreshes
// itself. Read-only.

//go:embed status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"dur":   func(d time.Duration) string { return roundDur(d).String() },
	"state": partitionState,
	"int":   func(n int64) int { return int(n) },
	"count": func(n int, noun string) string {
		if n == 1 {
			return "1 " + noun
		}
		return fmt.Sprintf("%d %ss", n, noun)
	},
}).Parse(statusHTML))

// statusRefresh is how often the page reloads itself, in seconds.
const statusRefresh = 5

// statusView is what the page shows.
type statusView struct {
	Now              time.Time
	Host, Group      string
	Member, Protocol string
	Generation       int32
	Health           Health
	Stats            Stats
	Parked           []parkedView
	DLQReasons       []reasonCount
	Parking, Control bool
	HandlerTimeout   time.Duration
	Refresh          int
	// Actions: the page's forms are shown (Config.StatusActions), each
	// with Token; Did is the outcome of the last one.
	Actions    bool
	Token, Did string
	Topics     []string
}

// parkedView is one parked session of an owned partition.
type parkedView struct {
	Topic     string
	Partition int32
	Lane      string // its lane's key as the parked set names it (hex in the release form: a keyless lane's has a NUL)
	ParkedSession
	Retrying  bool
	Paused    bool // by an operator (Config.Control): not retried until resumed
	NotBefore time.Time
}

type reasonCount struct {
	Reason Reason
	N      int64
}

// statusView gathers the page's view at now.
func (c *Consumer) statusView(now time.Time) statusView {
	st := c.Stats()
	v := statusView{Now: now, Group: c.cfg.Group, Health: c.health(st, now), Stats: st, Protocol: c.member.protocol(),
		Parking: c.park != nil, Control: c.ctlLog != nil, HandlerTimeout: c.cfg.HandlerTimeout, Refresh: statusRefresh}
	v.Host, _ = os.Hostname()
	if cl := c.client.Load(); cl != nil {
		v.Member, v.Generation = cl.GroupMetadata()
	}
	for r, n := range st.DeadLetteredByReason {
		v.DLQReasons = append(v.DLQReasons, reasonCount{r, n})
	}
	slices.SortFunc(v.DLQReasons, func(a, b reasonCount) int { return strings.Compare(string(a.Reason), string(b.Reason)) })
	for _, p := range c.own.all() {
		v.Parked = append(v.Parked, p.parkedViews()...)
	}
	paused := map[[2]string]bool{}
	for _, s := range st.Control.Sessions {
		paused[[2]string{s.Topic, s.Session}] = s.Paused
	}
	for i := range v.Parked {
		v.Parked[i].Paused = paused[[2]string{v.Parked[i].Topic, v.Parked[i].Session}]
	}
	slices.SortFunc(v.Parked, func(a, b parkedView) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return strings.Compare(a.Session, b.Session)
	})
	return v
}

// parkedViews lists p's parked sessions.
func (p *partition) parkedViews() []parkedView {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pk == nil {
		return nil
	}
	var out []parkedView
	for _, s := range p.pk.set.ParkedSessions() {
		out = append(out, parkedView{Topic: p.key.topic, Partition: p.key.partition, Lane: hex.EncodeToString([]byte(s.Session)), Retrying: s.Retrying, NotBefore: s.NotBefore,
			ParkedSession: ParkedSession{Topic: p.key.topic, Partition: p.key.partition, Session: sessionName(s.Session), Held: s.Held,
				Offsets: s.Offsets, Since: s.Since, Retries: s.Retries}})
	}
	return out
}

// partitionState is a partition's state in words, for the page.
func partitionState(p PartitionStats) string {
	var out []string
	switch {
	case p.Draining:
		out = append(out, "draining")
	case p.Stalled:
		out = append(out, "stalled "+roundDur(p.StalledFor).String())
	case p.HeldWaiting != "":
		out = append(out, "held by a "+p.HeldWaiting+" session")
	}
	if p.Paused {
		out = append(out, "fetch paused (MaxBufferedRecords)")
	}
	if p.DeadLetterError != "" {
		out = append(out, "dead-letter writes failing: "+p.DeadLetterError)
	}
	if p.CommitError != "" {
		out = append(out, "commits failing: "+p.CommitError)
	}
	if p.Park.Error != "" {
		out = append(out, "parked set unavailable: "+p.Park.Error)
	}
	if len(out) == 0 {
		return "flowing"
	}
	return strings.Join(out, "; ")
}

// roundDur rounds d for people: to the millisecond below a second, to
// the second above.
func roundDur(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// serveStatus writes the status page.
func (c *Consumer) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// No script, nothing from elsewhere, forms only to itself, and never
	// in another site's frame (a click there would carry the token).
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	v := c.statusView(time.Now())
	if v.Actions = c.cfg.StatusActions; v.Actions {
		v.Token, v.Did, v.Topics = c.statusToken, r.URL.Query().Get("did"), c.cfg.Topics
		v.Refresh = 30 // time to fill a form
	}
	if err := statusTmpl.Execute(w, v); err != nil {
		c.log().Debug().Err(err).Msg("status page: writing it failed (the reader went away?)")
	}
}
