package consumer

import (
	"context"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"
)

// The park loop: it retries due parked heads, picks up release markers and
// retries failed rebuilds, for every owned partition with parking.

// parkLoop queues the retries of parked heads that are due, in their
// sessions' lanes, until ctx ends.
func (c *Consumer) parkLoop(ctx context.Context) {
	tick := min(max(c.cfg.Park.Delay/4, 10*time.Millisecond), 250*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	looked := time.Now() // for release markers
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(looked) >= releaseEvery(c.cfg.Park.Delay) {
			c.pickUpReleases(ctx)
			looked = now
		}
		for _, p := range c.own.all() {
			// A retried rebuild is running work of its partition: a revoke's
			// drain waits for it, so its fence, of the generation the member
			// is in now, lands before the partition goes to a new owner of
			// that generation, whose later fence is then in force.
			if p.parkRebuildDue(now) && p.startExtra() {
				c.retryRebuild(ctx, p)
				p.finishExtra()
			}
			for _, lane := range p.parkDue(now, c.pausedIn(p.key.topic)) {
				c.parkLoopQueued.Add(1)
				c.queueParkRetry(p, lane)
			}
		}
	}
}

// pausedIn is the park loop's skip for topic: its paused sessions' heads
// are not due (nil without per-session control).
func (c *Consumer) pausedIn(topic string) func(string) bool {
	if c.ctl == nil {
		return nil
	}
	return func(s string) bool { return c.ctl.Paused(control.Key{Topic: topic, Session: s}) }
}

// queueParkRetry queues a retry of lane's parked head in its lane (the
// session's: retries and the session's source records are serialised).
func (c *Consumer) queueParkRetry(p *partition, lane string) {
	c.shardOf(lane).enqueue(&work{p: p, seq: parkSeq, lane: lane, parkRetry: true})
}
