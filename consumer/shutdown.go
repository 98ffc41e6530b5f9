package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// drainOnStop waits for the end of the poll loop's context, then starts the
// shutdown: the background loops stop, every owned partition is fenced
// (they stay owned: a revoke arriving meanwhile waits for the same drain),
// and running handlers get ShutdownTimeout to finish before their
// contexts are cancelled. It runs on its own goroutine, owned by Run, so
// the drain's clock starts at the cancellation.
func (c *Consumer) drainOnStop(pollCtx context.Context, stopBg context.CancelFunc) {
	<-pollCtx.Done()
	c.stop.began.Store(time.Now().UnixNano())
	c.stop.begin()
	stopBg()
	parts := c.own.stop()
	c.logShutdownBegin(parts)
	c.stop.left = waitDrained(context.Background(), parts, c.cfg.ShutdownTimeout)
	c.logDrainLeft(c.stop.left)
	c.stop.all = parts
	c.cancelWork() // handlers still running, retry waits and DLQ writes end
	close(c.stop.done)
}

// finalDeadline is the deadline of a commit starting at now: CommitTimeout
// from now, and no later than ShutdownTimeout + CommitTimeout after the
// shutdown began (once it has). A revoke's commit during the shutdown and
// the shutdown's own final commit share that bound.
func (c *Consumer) finalDeadline(now time.Time) time.Time {
	d := now.Add(c.cfg.CommitTimeout)
	if at, ok := c.stop.beganAt(); ok {
		d = minTime(d, at.Add(c.cfg.ShutdownTimeout+c.cfg.CommitTimeout))
	}
	return d
}

// untilFinal is ctx, ended also at the shutdown's final deadline once
// the shutdown begins, whether it began before or meanwhile: a take-up
// (onAssigned) the poll loop waits for then ends CommitTimeout after the
// shutdown began at the latest, so the final commit and the leave keep
// Run's bound. Call its cancel when done.
func (c *Consumer) untilFinal(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var timer *time.Timer
	ended := false
	stop := context.AfterFunc(c.stop.begun, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			timer = time.AfterFunc(time.Until(c.finalDeadline(time.Now())), cancel)
		}
	})
	return ctx, func() {
		stop()
		mu.Lock()
		ended = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// shutdown runs once the poll loop ended: it waits for the drain
// (drainOnStop), for the lanes to end, commits what is still owned,
// releases, leaves and closes; see Run. Handlers are cancelled, and lanes
// have ended, before any partition is released: a session never runs here
// after the group may have handed its partition to another member.
func (c *Consumer) shutdown(bg *sync.WaitGroup) error {
	<-c.stop.done
	c.lanes.stop()
	c.lanes.wg.Wait()
	bg.Wait()
	c.member.endHold() // no handler runs any more: a hold in force is over

	ctx, cancel := context.WithDeadline(context.Background(), c.finalDeadline(time.Now()))
	defer cancel()
	var errs []error
	c.takeUps.wait(ctx)  // a take-up during the shutdown reads what this commit hands on
	owned := c.own.all() // what a revoke during the drain did not take
	if err := c.finalCommit(ctx, owned); err != nil {
		errs = append(errs, err)
	}
	c.own.release(owned)
	c.leave()
	if c.dlq != nil {
		if err := c.dlq.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("consumer: close dead-letter client: %w", err))
		}
	}
	c.closePark()
	c.client.Load().CloseAllowingRebalance()
	// franz-go's Close (v1.22) starts a leave of its own on a goroutine and,
	// having found the group left already, does not wait for it; it then
	// ends with a final poll (PollFetches(nil)), which under
	// BlockRebalanceOnPoll counts a poller when a fetch was still buffered.
	// A leave goroutine that checks after that poll waits for a rebalance
	// allowance no one would give, for ever (goleak found it in CI). Nothing
	// polls after Close: allowing it now lets that goroutine end.
	c.client.Load().AllowRebalance()
	if err := c.unfinished(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unfinished names what the shutdown left undone, for its next owner to
// run again: partitions whose handlers still ran after ShutdownTimeout,
// and records held because their dead-letter copy could not be written.
// Records the fence kept from starting are not listed: leaving them is
// what a shutdown does.
func (c *Consumer) unfinished() error {
	var why []string
	for _, p := range c.stop.left {
		why = append(why, fmt.Sprintf("%s/%d: handlers still running after ShutdownTimeout (%v)",
			p.key.topic, p.key.partition, c.cfg.ShutdownTimeout))
	}
	for _, p := range c.stop.all {
		if off, since, err, ok := p.deadLetterBlocked(); ok {
			why = append(why, fmt.Sprintf("%s/%d: dead-letter write of offset %d to %q failing since %s: %s",
				p.key.topic, p.key.partition, off, c.cfg.DeadLetterTopic, since.UTC().Format(time.RFC3339), err))
		} else if off, ok := p.deadLetterCut(); ok {
			why = append(why, fmt.Sprintf("%s/%d: dead-letter write of offset %d to %q ended by the shutdown before the broker answered",
				p.key.topic, p.key.partition, off, c.cfg.DeadLetterTopic))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w (the next owner runs it again): %s", ErrUnfinished, strings.Join(why, "; "))
}

// leave leaves the group within LeaveTimeout. A leave waits for a join
// under way, and a join lasts until the group's rebalance completes (up to
// its rebalance timeout) while other members come and go; past the timeout
// the client's context is cancelled, which ends the join, and the group
// notices the member gone at its session timeout.
func (c *Consumer) leave() {
	// The poll loop has ended, so no poll is in flight: a leave, and the
	// one Close makes, waits (BlockRebalanceOnPoll) until every poll has
	// allowed the rebalance that leaving is.
	c.client.Load().AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.LeaveTimeout)
	defer cancel()
	if err := c.client.Load().LeaveGroupContext(ctx); err != nil {
		c.log().Warn().Err(err).Stringer("timeout", c.cfg.LeaveTimeout).Msg("leave group cut short; the group sees this member gone at its session timeout")
		c.cancelClient()
	}
}

// warnRebalanceTimeout warns when a revoke can outlast the group's
// rebalance timeout: a member still draining then is removed from the
// group (classic protocol), and its partitions move while it commits.
func (c *Consumer) warnRebalanceTimeout() {
	rt, ok := c.client.Load().OptValue(kgo.RebalanceTimeout).(time.Duration)
	if need := c.cfg.RevokeTimeout + c.cfg.CommitTimeout; ok && need >= rt {
		c.log().Warn().Stringer("revoke_timeout", c.cfg.RevokeTimeout).Stringer("commit_timeout", c.cfg.CommitTimeout).
			Stringer("rebalance_timeout", rt).Str("group", c.cfg.Group).
			Msg("RevokeTimeout + CommitTimeout is not below the group's rebalance timeout: a slow revoke can be cut off by the group; lower RevokeTimeout or raise kgo.RebalanceTimeout")
	}
}
