package consumer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Health says whether the consumer is alive and ready, and why not.
type Health struct {
	// Live: Run is running. A probe that restarts a consumer that is not
	// live is right; restarting one that is only not ready rarely helps (a
	// poison record stalls its next owner too).
	Live bool `json:"live"`
	// Ready: live, a broker answering, every needed topic present, in its
	// group (assigned, possibly nothing, and heartbeats taken), and
	// nothing holds it back: no stalled partition (nor one whose record has
	// waited StallTimeout while the member's work is held), no dead-letter
	// write failing for a record not done, the last commit of every owned
	// partition acknowledged, the circuit breaker closed. Each reason
	// clears as soon as what it names is over;
	// https://github.com/lanesdev/lanes/blob/main/docs/observability.md#health-and-diagnostics
	// lists when each is set and cleared.
	Ready bool `json:"ready"`
	// Reasons lists what makes it not live or not ready, one line each,
	// naming the partition, offset, session and since when; empty (never
	// nil) when it is ready.
	Reasons []string `json:"reasons"`
	// Notices lists what an operator may want to know that does not make
	// the member not ready: an operator's own decisions that have lasted
	// long, such as sessions paused longer than Control.PausedHealthAge.
	// Empty, never nil, when there is none.
	Notices []string `json:"notices"`
}

// Health evaluates the consumer's health from its Stats.
func (c *Consumer) Health() Health {
	return c.health(c.Stats(), time.Now())
}

func (c *Consumer) health(st Stats, now time.Time) Health {
	h := Health{Live: c.ran.Load() && !c.returned.Load(), Reasons: []string{}, Notices: []string{}}
	switch {
	case !c.ran.Load():
		h.Reasons = append(h.Reasons, "not running: Run has not been called")
	case c.returned.Load():
		h.Reasons = append(h.Reasons, "not running: Run returned")
	}
	if r := c.reach.reason(); r != "" {
		h.Reasons = append(h.Reasons, r)
	}
	h.Reasons = append(h.Reasons, c.topics.reasons()...)
	if r := c.member.reason(now); r != "" {
		h.Reasons = append(h.Reasons, r)
	}
	for _, p := range st.Partitions {
		if r := c.stallReason(p, st.WorkHeld, now); r != "" {
			h.Reasons = append(h.Reasons, r)
		}
		if p.DeadLetterError != "" {
			h.Reasons = append(h.Reasons, fmt.Sprintf("%s/%d dead-letter writes failing for %v at offset %d: %s",
				p.Topic, p.Partition, p.DeadLetterBlockedFor.Round(time.Second), p.DeadLetterBlockedAt, p.DeadLetterError))
		}
	}
	if b := st.Breaker; b.Open {
		h.Reasons = append(h.Reasons, fmt.Sprintf("breaker open since %s (%v), %d of %d attempts failed: fetching paused, probing every %v",
			b.OpenedAt.UTC().Format(time.RFC3339), now.Sub(b.OpenedAt).Round(time.Second), b.Failures, b.Calls, c.cfg.Breaker.ProbeInterval))
	}
	if c.cfg.Park.Enabled {
		h.Reasons = append(h.Reasons, parkReasons(st.Partitions, c.cfg.Park.HealthAge)...)
	}
	h.Reasons = append(h.Reasons, growthReasons(st.Growing, c.cfg.Growth.HealthAge)...)
	reasons, notices := c.controlReasons(st, now)
	h.Reasons, h.Notices = append(h.Reasons, reasons...), append(h.Notices, notices...)
	h.Reasons = append(h.Reasons, c.txReasons(now)...)
	if r := commitReason(st.Partitions, now); r != "" {
		h.Reasons = append(h.Reasons, r)
	}
	h.Ready = h.Live && len(h.Reasons) == 0
	return h
}

// stallReason is p's line about the record holding its watermark: stalled
// (StalledFor reached StallTimeout), or, while this member's work is held
// as a whole (held names the holds), held and not stalled once the
// watermark has waited StallTimeout (the hold's own line says why; this
// one names the record that waits); "" otherwise.
func (c *Consumer) stallReason(p PartitionStats, held string, now time.Time) string {
	since := now.Add(-p.WatermarkAge).UTC().Format(time.RFC3339)
	switch {
	case p.HeldWaiting != "":
		return "" // paused or throttled: controlReasons
	case held != "" && p.HeldAt >= 0 && p.WatermarkAge >= c.cfg.StallTimeout:
		return fmt.Sprintf("%s/%d held, not stalled, since %s (%v): offset %d, session %q waits while this member's work is held (%s); "+
			"held time does not count toward StallTimeout (%v of %v counted)",
			p.Topic, p.Partition, since, p.WatermarkAge.Round(time.Second), p.HeldAt, p.HeldBySession, held,
			p.StalledFor.Round(time.Second), c.cfg.StallTimeout)
	case p.Stalled && held == "":
		return fmt.Sprintf("%s/%d stalled since %s (%v): held by offset %d, session %q",
			p.Topic, p.Partition, since, p.WatermarkAge.Round(time.Second), p.HeldAt, p.HeldBySession)
	}
	return ""
}

// commitReason names the owned partitions whose last commit failed, since
// when the first of them fails, and their distinct errors; "" when none
// fails. A partition's failure ends with a successful commit of it (or
// with nothing left to commit); a released partition is not listed.
func commitReason(parts []PartitionStats, now time.Time) string {
	var names, errs []string
	var longest time.Duration
	for _, p := range parts {
		if p.CommitError == "" {
			continue
		}
		names = append(names, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		longest = max(longest, p.CommitFailingFor)
		if !slices.Contains(errs, p.CommitError) {
			errs = append(errs, p.CommitError)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("commits failing for %s since %s: %s", strings.Join(names, ", "),
		now.Add(-longest).UTC().Format(time.RFC3339), strings.Join(errs, "; "))
}

// HealthHandler serves the consumer's health for probes and people:
//
//	GET livez         200 when Live, else 503; the reasons in the body
//	GET readyz        200 when Ready, else 503; the reasons in the body
//	GET status        the member's status page: Health and Stats as HTML for people
//	POST status/...   its actions (release, pause, resume), with Config.StatusActions
//	GET debug/lanes   Health and Stats as JSON (watermark holders, hot sessions)
//
// Mount it under a prefix of your own, for example
// mux.Handle("/lanes/", http.StripPrefix("/lanes", c.HealthHandler())).
func (c *Consumer) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		h := c.Health()
		writeProbe(w, h.Live, h.Reasons)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		h := c.Health()
		writeProbe(w, h.Ready, h.Reasons)
	})
	mux.HandleFunc("GET /status", c.serveStatus)
	mux.Handle("POST /status/", c.statusActions())
	mux.HandleFunc("GET /debug/lanes", func(w http.ResponseWriter, r *http.Request) {
		st := c.Stats()
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Health Health `json:"health"`
			Stats  Stats  `json:"stats"`
		}{c.health(st, time.Now()), st})
	})
	return mux
}

// writeProbe writes a probe's answer: "ok", or 503 and one reason a line.
func writeProbe(w http.ResponseWriter, ok bool, reasons []string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ok {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, r := range reasons {
		fmt.Fprintln(w, r)
	}
}

// growthReasons are Health's lines for moved sessions waiting longer than
// Growth.HealthAge.
func growthReasons(gs []GrowthStats, age time.Duration) []string {
	var out []string
	for _, g := range gs {
		if g.Waiting == 0 || g.OldestWait < age {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d sessions moved by the topic's growth (partition counts %v) wait for their old partitions; "+
			"session %q on partition %d has waited %v for partitions %v: their records from before it are not handled yet, "+
			"or those partitions' owners do not report them (are they consumed, by lanes members of this version?)",
			g.Topic, g.Waiting, g.Counts, g.OldestSession, g.OldestPartition, g.OldestWait.Round(time.Second), g.OldestWaitsFor))
	}
	return out
}
