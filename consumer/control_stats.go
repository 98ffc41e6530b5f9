package consumer

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ControlStats is per-session control's state on this member
// (Config.Control, Config.Throttle); its zero value when both are off.
type ControlStats struct {
	// Sessions lists the group's sessions an operator paused or limited,
	// as this member read them from the control topic, oldest first.
	Sessions []ControlledSession `json:"sessions"`
	// LanesPaused and LanesThrottled count this member's lanes waiting,
	// without a worker, for a paused session and for a rate.
	LanesPaused    int `json:"lanes_paused"`
	LanesThrottled int `json:"lanes_throttled"`
	// PausedParked counts the records parked because their session was
	// paused (with parking on): the first of each run, its session's later
	// records follow it to the park topic as a parked session's do.
	PausedParked int64 `json:"paused_parked"`
	// Buckets and Resources count the rate buckets of sessions and the
	// resources this member keeps (idle ones are forgotten).
	Buckets   int `json:"buckets"`
	Resources int `json:"resources"`
}

// ControlledSession is one session's setting in the control topic.
type ControlledSession struct {
	Topic   string `json:"topic"`
	Session string `json:"session"`
	// Paused: its records wait (or are parked) until it is resumed.
	Paused bool `json:"paused"`
	// Rate limits it to Rate records per second, in bursts of Burst; 0:
	// the default (ThrottlePolicy.Session), if any.
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
	// By, At and Reason say who set it, when and why; TopicID is the
	// topic's ID then.
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	TopicID string    `json:"topic_id,omitempty"`
	// Waiting counts this member's lanes waiting for it to resume (Stats
	// only).
	Waiting int `json:"waiting"`
}

func (c *Consumer) controlStats() ControlStats {
	if c.ctl == nil {
		return ControlStats{Sessions: []ControlledSession{}}
	}
	out := ControlStats{Sessions: []ControlledSession{}, PausedParked: c.stats.pausedParked.Load()}
	for _, s := range c.ctl.Snapshot() {
		out.Sessions = append(out.Sessions, ControlledSession{Topic: s.Topic, Session: s.Session, Paused: s.Paused,
			Rate: s.Rate, Burst: s.Burst, By: s.By, At: s.At, Reason: s.Reason, TopicID: s.TopicID, Waiting: s.Waiting})
	}
	sortControlled(out.Sessions)
	out.LanesPaused, out.LanesThrottled = c.asleepCounts()
	_, out.Buckets, out.Resources = c.ctl.Sizes()
	return out
}

func sortControlled(ss []ControlledSession) {
	slices.SortFunc(ss, func(a, b ControlledSession) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
}

// maxControlReasons bounds the paused sessions Health names one by one.
const maxControlReasons = 5

// controlReasons is what Health says of per-session control at now: a
// partition whose buffer is full behind a paused or throttled session
// (its other sessions wait: never in silence), and sessions paused longer
// than Control.PausedHealthAge.
func (c *Consumer) controlReasons(st Stats, now time.Time) []string {
	var out []string
	for _, p := range st.Partitions {
		if p.HeldWaiting != "" && p.Paused {
			out = append(out, fmt.Sprintf("%s/%d full (MaxBufferedRecords) behind %s session %q at offset %d since %s: its other sessions wait for it; "+
				"resume or raise its limit (lanes session), or turn parking on so a paused session's records move aside",
				p.Topic, p.Partition, p.HeldWaiting, p.HeldBySession, p.HeldAt, now.Add(-p.WatermarkAge).UTC().Format(time.RFC3339)))
		}
	}
	if c.ctlLog == nil {
		return out
	}
	var old []string
	for _, s := range st.Control.Sessions {
		if s.Paused && now.Sub(s.At) >= c.cfg.Control.PausedHealthAge {
			old = append(old, fmt.Sprintf("%s/%q (by %s: %s)", s.Topic, s.Session, orNone(s.By), orNone(s.Reason)))
		}
	}
	if len(old) > 0 {
		more := ""
		if len(old) > maxControlReasons {
			more = fmt.Sprintf(" and %d more", len(old)-maxControlReasons)
			old = old[:maxControlReasons]
		}
		out = append(out, fmt.Sprintf("sessions paused longer than Control.PausedHealthAge (%v): %s%s; resume with lanes session resume, list with lanes session list",
			c.cfg.Control.PausedHealthAge, strings.Join(old, ", "), more))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
