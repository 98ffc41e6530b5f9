package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/control"
)

// The control topic as a member reads it: loaded to its end before the
// first poll (a restarted member knows every pause before it handles a
// record), then read again every Control.Interval, each entry of the
// member's group applied to the gate in log order.

// errControlMissing: the control topic does not exist (yet): nothing is
// paused or limited.
var errControlMissing = errors.New("control topic missing")

// span is the control topic's incarnation, start and end offsets. Its
// metadata is asked of the brokers each time (kadm's ListTopics would
// answer a missing topic from the client's cache for seconds).
func (cl *controlLog) span(ctx context.Context, kc *kgo.Client) (id kadm.TopicID, start, end int64, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(cl.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, kc)
	if err != nil {
		return id, 0, 0, err
	}
	if len(resp.Topics) != 1 {
		return id, 0, 0, fmt.Errorf("control topic %s: the brokers answered for %d topics", cl.topic, len(resp.Topics))
	}
	switch err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return id, 0, 0, errControlMissing
	case err != nil:
		return id, 0, 0, err
	}
	id = resp.Topics[0].TopicID
	adm := kadm.NewClient(kc)
	var offs [2]int64
	for i, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		lo, err := list(ctx, cl.topic)
		if err != nil {
			return id, 0, 0, err
		}
		o, ok := lo.Lookup(cl.topic, 0)
		if !ok {
			return id, 0, 0, fmt.Errorf("control topic %s: no partition 0", cl.topic)
		}
		if o.Err != nil {
			return id, 0, 0, o.Err
		}
		offs[i] = o.Offset
	}
	return id, offs[0], offs[1], nil
}

// controlRead reads the control topic's entries written since the last
// read and applies those of this group. A topic made again (another
// incarnation) is read from its start, every earlier setting dropped.
func (c *Consumer) controlRead(ctx context.Context, kc *kgo.Client) error {
	cl := c.ctlLog
	id, start, end, err := cl.span(ctx, kc)
	if errors.Is(err, errControlMissing) {
		if cl.id != (kadm.TopicID{}) && !cl.missing.Load() {
			c.log().Warn().Str("control_topic", cl.topic).Int("settings", len(c.ctl.Snapshot())).
				Msg("control: the control topic is gone (deleted, or a broker does not know it yet): this member keeps the settings it read; a control topic made again is read from its start and replaces them")
		}
		cl.missing.Store(true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("control topic %s: %w", cl.topic, err)
	}
	cl.missing.Store(false)
	if cl.id != id && cl.id != (kadm.TopicID{}) || end < cl.next {
		c.controlReset("the control topic was made again")
		cl.next = 0
	}
	cl.id = id
	cl.next = max(cl.next, start) // records deleted below the start: nothing to read there
	if end <= cl.next {
		return nil
	}
	var resumed []control.Key
	var wakes []func()
	err = readRange(ctx, &c.cfg, "control", cl.topic, 0, cl.next, end, func(r *kgo.Record) {
		cl.next = r.Offset + 1
		group, k, s, err := control.Decode(r.Key, r.Value)
		if err != nil {
			c.log().Warn().Err(err).Str("control_topic", cl.topic).Int64("offset", r.Offset).
				Msg("control: entry skipped: not written by lanes session (or another version); write control entries with lanes session or PauseSession")
			return
		}
		if group != c.cfg.Group {
			return
		}
		was, _ := c.ctl.Setting(k)
		ws := c.ctl.Apply(k, s, time.Now())
		wakes = append(wakes, ws...)
		if was.Paused && !s.Paused {
			resumed = append(resumed, k)
		}
		c.logSetting(k, was, s)
	})
	c.resumed(wakes, resumed)
	if err != nil {
		return fmt.Errorf("control topic %s: %w", cl.topic, err)
	}
	cl.next = end
	return nil
}

// controlReset drops every setting (why says what happened to the topic):
// paused sessions resume.
func (c *Consumer) controlReset(why string) {
	var keys []control.Key
	var wakes []func()
	for _, s := range c.ctl.Snapshot() {
		if s.Paused {
			keys = append(keys, s.Key)
		}
		wakes = append(wakes, c.ctl.Apply(s.Key, control.Setting{}, time.Now())...)
	}
	if len(keys) > 0 {
		c.log().Warn().Str("control_topic", c.cfg.Control.Topic).Int("resumed", len(keys)).
			Msg("control: " + why + ": every setting read from it is dropped and paused sessions resume; pause them again with lanes session pause")
	}
	c.resumed(wakes, keys)
}

// logSetting logs a change of k's setting read from the control topic.
func (c *Consumer) logSetting(k control.Key, was, now control.Setting) {
	ev := c.log().Info().Str("topic", k.Topic).Str("session", k.Session).Str("by", now.By).Str("reason", now.Reason)
	switch {
	case now.Paused && !was.Paused:
		ev.Msg("control: session paused: its records wait (or, with parking on, are parked) until lanes session resume")
	case was.Paused && !now.Paused:
		ev.Msg("control: session resumed")
	case now.Rate != was.Rate || now.Burst != was.Burst:
		ev.Float64("rate", now.Rate).Int("burst", max(now.Burst, 1)).Msg("control: session limit set (rate 0: none)")
	}
}

// controlLoad reads the control topic to its end before the first poll,
// trying again until it succeeds or ctx ends: a member that handled
// records before it knew the pauses would break them.
func (c *Consumer) controlLoad(ctx context.Context) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
		err := c.controlRead(rctx, c.client.Load())
		cancel()
		c.ctlLog.noteRead(err, time.Now())
		if err == nil {
			c.ctlLog.loaded.Store(true)
			n := len(c.ctl.Snapshot())
			c.log().Debug().Str("control_topic", c.cfg.Control.Topic).Int("settings", n).Msg("control: loaded")
			return nil
		}
		c.log().Warn().Err(err).Stringer("retry_in", wait).
			Msg("control: cannot read the control topic before the first poll; trying again (no record is handled meanwhile): check the brokers and the member's read access to it")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// controlLoop, with per-session control or throttling on, reads the
// control topic every Control.Interval (at once when kicked), forgets
// idle rate buckets, and wakes sleeping lanes of fenced partitions, until
// ctx ends.
func (c *Consumer) controlLoop(ctx context.Context) {
	every := time.Second
	if c.ctlLog != nil {
		every = c.cfg.Control.Interval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var kick chan struct{}
	if c.ctlLog != nil {
		kick = c.ctlLog.kick
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		if c.ctlLog != nil {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
			err := c.controlRead(rctx, c.client.Load())
			if ctx.Err() == nil {
				c.ctlLog.noteRead(err, time.Now())
			}
			if err != nil && ctx.Err() == nil {
				c.log().Debug().Err(err).Msg("control: cannot read the control topic; trying again at the next interval")
			}
			cancel()
		}
		c.ctl.Tidy(time.Now())
		c.wakeFenced()
	}
}

// noteRead keeps whether the last read of the control topic failed (err)
// and since when, for Health.
func (cl *controlLog) noteRead(err error, now time.Time) {
	if err == nil {
		cl.failed.Store(nil)
		return
	}
	since := now
	if f := cl.failed.Load(); f != nil {
		since = f.since
	}
	cl.failed.Store(&controlFailed{since: since, err: err.Error()})
}

// reason is Health's line about the control topic at now: not read yet
// (no record is handled until it is), or failing for longer than three
// intervals (pauses written meanwhile are not seen); "" otherwise.
func (cl *controlLog) reason(now time.Time) string {
	f := cl.failed.Load()
	switch {
	case !cl.loaded.Load() && f != nil:
		return fmt.Sprintf("control topic %s unreadable since %s: %s; no record is handled until it is read (the pauses it holds must be known first): check the brokers and this member's read access to it",
			cl.topic, f.since.UTC().Format(time.RFC3339), f.err)
	case f != nil && now.Sub(f.since) >= 3*cl.cfg.Control.Interval:
		return fmt.Sprintf("control topic %s unreadable since %s: %s; pauses and limits written since are not seen by this member",
			cl.topic, f.since.UTC().Format(time.RFC3339), f.err)
	}
	return ""
}
