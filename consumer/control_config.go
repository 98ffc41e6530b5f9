package consumer

import (
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ControlPolicy turns on per-session control
// (https://github.com/lanesdev/lanes/blob/main/docs/control.md): an
// operator pauses, resumes or rate-limits one session of the group, from
// any machine (lanes session pause|resume|limit, or PauseSession and its
// kin), without knowing which member owns it. Settings are kept in a
// compacted control topic every member reads, so they hold across
// rebalances, restarts and rolling deploys. The zero value is off.
type ControlPolicy struct {
	// Enabled turns per-session control on: the member reads the control
	// topic before its first poll and keeps reading it.
	Enabled bool
	// Topic is the control topic, shared by every group of the cluster
	// (its entries name their group). PauseSession and CreateTopics make
	// it (one partition, compacted) when it is missing; a member finds
	// nothing paused until it exists. Default: [DefaultControlTopic].
	Topic string
	// Interval is how often a member looks for new entries: a pause takes
	// effect on every member within it. Default: [DefaultControlInterval].
	Interval time.Duration
	// PausedHealthAge makes Health report a session paused longer than
	// this. Default: [DefaultPausedHealthAge].
	PausedHealthAge time.Duration
}

// Defaults of ControlPolicy, applied to its zero fields when Enabled.
const (
	DefaultControlTopic    = "lanes.control"
	DefaultControlInterval = time.Second
	DefaultPausedHealthAge = time.Hour
)

func (p ControlPolicy) withDefaults() (ControlPolicy, error) {
	switch {
	case p.Interval < 0:
		return p, fmt.Errorf("%w: Control.Interval: must not be negative, got %v", ErrConfig, p.Interval)
	case p.PausedHealthAge < 0:
		return p, fmt.Errorf("%w: Control.PausedHealthAge: must not be negative, got %v", ErrConfig, p.PausedHealthAge)
	}
	orDefault(&p.Topic, DefaultControlTopic)
	orDefault(&p.Interval, DefaultControlInterval)
	orDefault(&p.PausedHealthAge, DefaultPausedHealthAge)
	return p, nil
}

// Limit bounds a session or a resource (ThrottlePolicy): Rate records per
// second, in bursts of up to Burst (0 with a Rate: 1), and for a
// resource, Concurrency records in progress at once. A zero field bounds
// nothing.
type Limit struct {
	Rate        float64
	Burst       int
	Concurrency int
}

// ThrottlePolicy limits the pace of sessions and of the resources their
// records use (https://github.com/lanesdev/lanes/blob/main/docs/control.md).
// A record held by a rate waits in its lane without a worker, and its
// partition keeps flowing for every other session; one held by a
// resource's concurrency limit waits for a slot (first come, first
// served) as it waits for a MaxConcurrency turn. The zero value limits
// nothing.
type ThrottlePolicy struct {
	// Session limits every session of every consumed topic (Rate and
	// Burst; Concurrency does not apply: a session runs one record at a
	// time). A session's own limit, set with LimitSession, replaces it.
	// Default: none.
	Session Limit
	// Resource names the resource a record uses (a tenant, a downstream
	// shard); "" uses none. It is called on the poll loop, one call at a
	// time, as SessionKey is. Default: none.
	Resource func(*kgo.Record) string
	// Limits is the limit of each resource named in it; other resources
	// have Default.
	Limits  map[string]Limit
	Default Limit
}

// on reports whether the policy limits anything.
func (t ThrottlePolicy) on() bool {
	return t.Session != (Limit{}) || t.Resource != nil
}

// limitOf is resource res's limit.
func (t ThrottlePolicy) limitOf(res string) Limit {
	if l, ok := t.Limits[res]; ok {
		return l
	}
	return t.Default
}

func (t ThrottlePolicy) validate() (ThrottlePolicy, error) {
	bad := func(field string, l Limit) error {
		switch {
		case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
			return fmt.Errorf("%w: Throttle.%s.Rate: must be a finite number not below 0, got %v", ErrConfig, field, l.Rate)
		case l.Burst < 0:
			return fmt.Errorf("%w: Throttle.%s.Burst: must not be negative, got %d", ErrConfig, field, l.Burst)
		case l.Concurrency < 0:
			return fmt.Errorf("%w: Throttle.%s.Concurrency: must not be negative, got %d", ErrConfig, field, l.Concurrency)
		}
		return nil
	}
	if err := bad("Session", t.Session); err != nil {
		return t, err
	}
	if t.Session.Concurrency != 0 {
		return t, fmt.Errorf("%w: Throttle.Session.Concurrency: a session runs one record at a time; bound handlers across sessions with MaxConcurrency or a resource's Concurrency", ErrConfig)
	}
	if err := bad("Default", t.Default); err != nil {
		return t, err
	}
	lims := make(map[string]Limit, len(t.Limits))
	for name, l := range t.Limits {
		if err := bad(fmt.Sprintf("Limits[%q]", name), l); err != nil {
			return t, err
		}
		lims[name] = l
	}
	t.Limits = lims // the caller's map may change after New
	if t.Resource == nil && (len(t.Limits) > 0 || t.Default != (Limit{})) {
		return t, fmt.Errorf("%w: Throttle.Limits, Throttle.Default: set but Throttle.Resource is nil: name the resource of each record", ErrConfig)
	}
	return t, nil
}
