package consumer

import (
	"context"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
)

// The gate's watchers, off the per-record path: the silence loop, which
// holds the member's work (silence.go says when) and cancels the attempts
// running, and the watchdog's look at an open breaker (breakerIdle,
// probeHung). The gate itself, which each attempt passes, is gate.go.

// silenceLoop checks the member's silence when the hold could first be
// due, and at once when a hold ended or a session began (membership.wake),
// and holds the work when it is due; it runs until done is closed: the
// shutdown's drain is over (handlers run during it, on partitions still
// owned).
func (c *Consumer) silenceLoop(done <-chan struct{}) {
	t := time.NewTimer(c.member.checkSilence(time.Now(), c.holdWork))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-c.member.wake:
			t.Reset(c.member.checkSilence(time.Now(), c.holdWork))
		case now := <-t.C:
			t.Reset(c.member.checkSilence(now, c.holdWork))
		}
	}
}

// holdWork cancels the context of every attempt running; the hold (set
// before) keeps any from starting. An attempt that begins meanwhile sees
// the hold itself (track).
func (c *Consumer) holdWork() {
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			if a := l.actx.Load(); a != nil {
				a.cancel(context.Canceled)
			}
		}
		s.mu.Unlock()
	}
}

// breakerIdle, run by the watchdog, lets fetching resume while the breaker
// is open with nothing to probe with (every held record ended — dead-lettered
// as permanent, fenced by a rebalance — and the partitions were paused): the
// next record fetched becomes the probe and its lane's wait holds fetching
// again. Without it such a breaker would stay open for ever.
//
// It is also where a hung probe is noticed when no lane is asking: the
// watchdog's tick gives it up as soon as it passes its limit.
func (c *Consumer) breakerIdle(now time.Time) {
	if !c.brk.OpenNow() {
		return
	}
	idle, hung := c.brk.Idle(now)
	c.probeHung(hung, now)
	if idle {
		c.brk.ReleaseIdle()
		c.flow.holdChanged()
	}
}

// probeHung warns that probe id was given up as hung at now (nothing when
// id is 0): counted as a failed probe, the next one runs on another lane,
// its own lane still waits for the handler. The record is named when the
// gate still knows it.
func (c *Consumer) probeHung(id breaker.ProbeID, now time.Time) {
	if id == 0 {
		return
	}
	b := c.brk
	ev := c.log().Warn().Uint64("probe", uint64(id)).Stringer("timeout", c.cfg.HandlerTimeout).
		Stringer("probe_interval", b.Policy().ProbeInterval)
	if r := c.probeWork.Load(); r != nil && r.id == id {
		ev = ev.Str("topic", r.w.rec.Topic).Int32("partition", r.w.rec.Partition).Int64("offset", r.w.rec.Offset).
			Str("session", r.w.session).Stringer("running", now.Sub(r.start))
	}
	ev.Msg("circuit breaker probe given up as hung: it ran past HandlerTimeout (its handler ignores its context); " +
		"counted as a failed probe, the next probe runs on another lane, its own lane waits for the handler to return; " +
		"make the handler honour its context")
}
