package consumer

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

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

// controlReasons is what Health says of per-session control at now: as
// reasons, a partition whose buffer is full behind a paused or throttled
// session (its other sessions wait: never in silence) and a control topic
// that cannot be read; as notices (an operator's decision, not a fault),
// sessions paused longer than Control.PausedHealthAge.
func (c *Consumer) controlReasons(st Stats, now time.Time) (out, notices []string) {
	for _, p := range st.Partitions {
		if p.HeldWaiting != "" && p.Paused {
			out = append(out, fmt.Sprintf("%s/%d full (MaxBufferedRecords) behind %s session %q at offset %d since %s: its other sessions wait for it; "+
				"resume or raise its limit (lanes session), or turn parking on so a paused session's records move aside",
				p.Topic, p.Partition, p.HeldWaiting, p.HeldBySession, p.HeldAt, now.Add(-p.WatermarkAge).UTC().Format(time.RFC3339)))
		}
	}
	if c.ctlLog == nil {
		return out, nil
	}
	if r := c.ctlLog.reason(now); r != "" {
		out = append(out, r)
	}
	var old []string
	for _, s := range st.Control.Sessions {
		if s.Paused && now.Sub(s.At) >= c.cfg.Control.PausedHealthAge {
			old = append(old, fmt.Sprintf("%s/%q (by %q: %q)", s.Topic, s.Session, orNone(s.By), orNone(s.Reason)))
		}
	}
	if len(old) > 0 {
		more := ""
		if len(old) > maxControlReasons {
			more = fmt.Sprintf(" and %d more", len(old)-maxControlReasons)
			old = old[:maxControlReasons]
		}
		notices = append(notices, fmt.Sprintf("sessions paused longer than Control.PausedHealthAge (%v): %s%s; resume with lanes session resume, list with lanes session list",
			c.cfg.Control.PausedHealthAge, strings.Join(old, ", "), more))
	}
	return out, notices
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
