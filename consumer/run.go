package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Run is the member's life from start to shutdown: the park and
// dead-letter clients, the group client, the background loops and the
// poll loop, whose records dispatch.go hands to the lanes.

// Run joins the group and processes records until ctx is cancelled, then
// shuts down, starting at the cancellation whatever the group is doing: it
// stops fetching, waits (at most ShutdownTimeout) for in-flight handlers,
// cancels the contexts of those still running and waits for them to
// return, commits every owned partition's watermark, leaves the group and
// returns. Partitions stay owned until their final commit: a rebalance
// during the drain waits for it. Run returns within ShutdownTimeout +
// CommitTimeout + LeaveTimeout of the cancellation, provided handlers
// return once their context is cancelled. It returns nil after a clean
// drain, an error wrapping ErrUnfinished naming each partition left with
// work undone and why (handlers still running, a record whose dead-letter
// copy could not be written; that work is redelivered to the next owner),
// one wrapping ErrUnreachable naming the brokers and the last dial error
// when no broker ever answered, or the error that stopped the client from
// starting. No goroutine started by Run outlives it.
//
// While it runs, Health says why the consumer is not ready: no broker
// answering, missing topics (checked at start and again periodically),
// the member out of its group, and what holds partitions back.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.ran.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	defer c.returned.Store(true)
	defer c.cancelClient()
	c.workCtx, c.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer c.cancelWork()
	c.own.work = c.workCtx
	if err := c.openPark(); err != nil { // before the group client: its first assignment rebuilds parked sets
		return err
	}
	wire, err := c.answerOpts()
	if err != nil {
		c.closePark()
		return fmt.Errorf("consumer: start client: %w", err)
	}
	c.wire = wire
	cl, err := c.openClient()
	if err != nil {
		c.closePark()
		return fmt.Errorf("consumer: start client: %w", err)
	}
	c.flow.client, c.flow.topics = cl, c.cfg.Topics
	c.client.Store(cl)
	c.member.setSessionTimeout(cl.OptValue(kgo.SessionTimeout))
	c.warnRebalanceTimeout()
	if c.cfg.DeadLetterTopic != "" {
		dcfg := c.cfg // the DLQ client logs through lanes' logger too
		dcfg.ClientOptions = append([]kgo.Opt{kgo.WithLogger(newKgoLogger(c.log(), "dead-letter"))}, c.cfg.ClientOptions...)
		dctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
		c.dlq, err = openDeadLetters(dctx, &dcfg, kadm.NewClient(cl))
		cancel()
		if err != nil {
			c.closePark()
			cl.Close()
			return err
		}
		if c.tx != nil {
			c.dlq.limit = batchLimit(cl, c.dlq.limit) // its copies go through the group client (deliver_dead.go: fitsDead)
		}
	}

	if c.ctlLog != nil {
		if err := c.controlLoad(ctx); err != nil { // cancelled before it could read the control topic
			c.closePark()
			if c.dlq != nil {
				_ = c.dlq.close(context.Background()) // nothing was written
			}
			cl.Close()
			return nil
		}
	}

	// The background loops, and every request they make, end when bgCtx
	// is cancelled at the start of the shutdown.
	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	// pollCtx ends the poll loop: cancelled with ctx, or when the loop
	// ends on its own (the client closed). Its end starts the shutdown
	// (drainOnStop) whatever the poll loop is doing meanwhile.
	pollCtx, endPoll := context.WithCancel(ctx)
	defer endPoll()
	bg.Add(8)
	go func() { defer bg.Done(); c.lanes.retireLoop(bgCtx) }()
	go func() { defer bg.Done(); c.flow.run(bgCtx.Done()) }()
	go func() { defer bg.Done(); c.commitLoop(bgCtx) }()
	go func() { defer bg.Done(); c.watchdog(bgCtx) }()
	go func() { defer bg.Done(); c.silenceLoop(c.stop.done) }()
	go func() { defer bg.Done(); c.drainOnStop(pollCtx, stopBg) }()
	go func() { defer bg.Done(); c.topicLoop(bgCtx) }()
	go func() { defer bg.Done(); c.growthLoop(bgCtx) }()
	if c.park != nil {
		bg.Add(1)
		go func() { defer bg.Done(); c.parkLoop(bgCtx) }()
	}
	if c.ctl != nil {
		bg.Add(2)
		go func() { defer bg.Done(); c.alarms.Run(bgCtx.Done()) }()
		go func() { defer bg.Done(); c.controlLoop(bgCtx) }()
	}

	c.poll(pollCtx)
	endPoll()
	err = c.shutdown(&bg)
	if c.tx != nil && c.tx.fatal != nil {
		err = errors.Join(c.tx.fatal, err)
	}
	c.metrics.close()
	if uerr := c.reach.neverReached(); uerr != nil {
		err = errors.Join(uerr, err)
	}
	c.logShutdownEnd(err)
	return err
}

// poll is the poll loop: fetch, dispatch to lanes, end the transaction
// when one is due (txTick), allow a rebalance.
func (c *Consumer) poll(ctx context.Context) {
	for ctx.Err() == nil {
		pctx, cancel := c.pollCtx(ctx)
		fs := c.client.Load().PollRecords(pctx, c.cfg.MaxPollRecords)
		cancel()
		if fs.IsClientClosed() {
			c.client.Load().AllowRebalance()
			return
		}
		c.noteUnknownTopicIDs(fs)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.logPollError(t, p, err)
			}
		})
		c.dispatch(fs)
		c.txTick(ctx)
		c.client.Load().AllowRebalance()
		if c.tx != nil && c.tx.fatal != nil && !c.txRejoin(ctx) {
			return // shut down while waiting to join again (Run returns ErrFenced)
		}
	}
	c.client.Load().AllowRebalance()
}

// openClient makes the member's group client: a transactional session
// with Config.Transactions.
func (c *Consumer) openClient() (*kgo.Client, error) {
	if c.cfg.Transactions.Enabled {
		return c.openTx(c.clientOpts())
	}
	return kgo.NewClient(c.clientOpts()...)
}

// logPollError logs an error a poll returned as what it is: a fetch error
// names its partition; an error of the client itself comes with topic ""
// (franz-go's partition -1 or 0): a group error (the group session failed;
// franz-go rejoins) names the group, another client error the brokers.
// Repeats of one client-level error, and of one topic's fetch error, are
// logged at most every logRepeatEvery.
func (c *Consumer) logPollError(topic string, partition int32, err error) {
	if topic != "" {
		c.logFetchError(topic, partition, err)
		return
	}
	ok, suppressed := c.pollLog.allow(err.Error(), time.Now())
	if !ok {
		return
	}
	var ge *kgo.ErrGroupSession
	if errors.As(err, &ge) {
		c.log().Warn().Err(err).Str("group", c.cfg.Group).Strs("brokers", c.cfg.Brokers).Int("suppressed", suppressed).
			Msg("consumer group error: franz-go reports the group session failing and retries; readiness says whether the member is in its group")
		return
	}
	c.log().Warn().Err(err).Strs("brokers", c.cfg.Brokers).Int("suppressed", suppressed).Msg("client error")
}
