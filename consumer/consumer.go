package consumer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/hold"
)

// Consumer runs the lanes pipeline over one consumer-group member. Create it
// with New and start it with Run.
type Consumer struct {
	cfg Config
	h   Handler      // set by New
	bh  BatchHandler // set by NewBatch

	own     *owners
	shards  []*shard
	flow    *flow
	client  *kgo.Client
	dlq     *deadLetters // nil without a DeadLetterTopic
	stats   counters
	tracer  *tracing.Tracer
	metrics *metrics
	brk     *breaker.Breaker // nil unless Config.Breaker.Enabled
	// probeWork is the running probe's record as the lanes know it, kept
	// by the breaker's gate (breaker_gate.go) to name a probe given up as
	// hung.
	probeWork atomic.Pointer[probeRec]
	park      *parkIO // nil unless Config.Park.Enabled
	// held measures the time the member's work is held as a whole (a
	// silence hold, an open breaker), which the stall watch does not count
	// (stall_clock.go).
	held *hold.Clock
	// parkLoopQueued counts the parked retries the park loop queued (the
	// others follow a done head at once: parkMark).
	parkLoopQueued atomic.Int64

	reach   *brokerWatch // whether any broker answers (connectivity.go)
	member  *membership  // whether the member is in its group (membership.go)
	topics  *topicWatch  // which needed topics are missing (topics.go)
	pollLog logLimiter   // repeated client-level poll errors
	parkLog logLimiter   // parked records not read back, per partition

	clientCtx    context.Context // the client's own context; cancelled to cut a leave short
	cancelClient context.CancelFunc

	workCtx    context.Context // parent of every handler context
	cancelWork context.CancelFunc
	lanes      *laneSet
	// userMu makes Filter and SessionKey run one call at a time: records
	// are admitted on the poll loop and, from a stash, on the flow
	// controller's goroutine, and neither callback is documented as safe
	// for concurrent use. Taken after partition.admitMu.
	userMu   sync.Mutex
	stop     stopper // when the shutdown began, and what its drain left
	takeUps  takeUps // partition take-ups under way (shutdown.go)
	ran      atomic.Bool
	returned atomic.Bool // Run returned
	crashed  atomic.Bool // set by tests to stop committing, as a killed process would
}

// New validates cfg, fills in its defaults and returns a consumer that
// calls h wrapped in cfg.Middleware (the first entry outermost). It returns an error wrapping ErrConfig that names the bad field.
// New does not connect; Run does.
func New(cfg Config, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: handler: must not be nil", ErrConfig)
	}
	th, isMap := h.(TopicHandlers)
	if isMap && len(cfg.Topics) == 0 {
		cfg.Topics = th.topics() // the map names what is consumed
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if isMap {
		if err := th.check(cfg.Topics); err != nil {
			return nil, err
		}
	}
	for i := len(cfg.Middleware) - 1; i >= 0; i-- {
		if h = cfg.Middleware[i](h); h == nil {
			return nil, fmt.Errorf("%w: Middleware: entry %d returned a nil handler", ErrConfig, i)
		}
	}
	c, err := build(cfg)
	if err != nil {
		return nil, err
	}
	c.h = h
	c.lanes = newLaneSet(c.process)
	c.makeShards()
	return c, nil
}

// build makes a consumer over a validated cfg, without its handler and
// lanes.
func build(cfg Config) (*Consumer, error) {
	c := &Consumer{cfg: cfg, own: newOwners(), flow: newFlow(),
		reach: newBrokerWatch(cfg.Brokers, cfg.Logger), member: newMembership(cfg.Group, cfg.Logger), topics: newTopicWatch(&cfg)}
	c.flow.drain = c.drainStash
	c.held = &hold.Clock{}
	c.member.heldTime = c.held
	c.stop.done = make(chan struct{})
	c.stop.begun, c.stop.begin = context.WithCancel(context.Background())
	c.clientCtx, c.cancelClient = context.WithCancel(context.Background())
	c.tracer = tracing.New(cfg.TracerProvider, cfg.Propagator)
	if cfg.Breaker.Enabled {
		held := c.held
		c.brk = breaker.New(cfg.Breaker.machine(), slowLimit(cfg.HandlerTimeout), func(open bool, now time.Time) {
			held.Set(hold.Breaker, open, now)
		})
		c.flow.holdFn = c.brk.WantsHold
	}
	var err error
	if c.metrics, err = newMetrics(c.Stats, cfg.Group, cfg.MeterProvider); err != nil {
		return nil, fmt.Errorf("consumer: metrics: %w", err)
	}
	return c, nil
}

func (c *Consumer) makeShards() {
	c.shards = make([]*shard, c.cfg.Shards)
	for i := range c.shards {
		c.shards[i] = &shard{lanesOf: c.lanes, lanes: map[string]*lane{}}
	}
}

func (c *Consumer) log() *zerolog.Logger { return c.cfg.Logger }

func (c *Consumer) clientOpts() []kgo.Opt {
	reset := kgo.NewOffset().AtStart()
	if c.cfg.StartOffset == StartLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.WithContext(c.clientCtx),
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(reset),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(c.cfg.FetchMaxWait),
		// A transactional upstream's aborted records are never handed
		// to the handler (a FetchIsolationLevel in ClientOptions wins);
		// its transaction markers reach admit, which passes them at
		// once, so the commit reaches the fetch position past them
		// rather than one short of the partition's end.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.OnPartitionsAssigned(c.member.assigned(c.onAssigned)),
		kgo.OnPartitionsRevoked(c.member.revoked(c.onRevoked)),
		kgo.OnPartitionsLost(c.member.lost(c.onLost)),
		// Before ClientOptions: a logger passed there replaces this one,
		// hooks passed there run after lanes'.
		kgo.WithLogger(newKgoLogger(c.log(), "consumer")),
		kgo.WithHooks(c.reach, c.member),
	}
	return append(opts, c.cfg.ClientOptions...)
}

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
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		c.closePark()
		return fmt.Errorf("consumer: start client: %w", err)
	}
	c.client, c.flow.client, c.flow.topics = cl, cl, c.cfg.Topics
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
	bg.Add(7)
	go func() { defer bg.Done(); c.lanes.retireLoop(bgCtx) }()
	go func() { defer bg.Done(); c.flow.run(bgCtx.Done()) }()
	go func() { defer bg.Done(); c.commitLoop(bgCtx) }()
	go func() { defer bg.Done(); c.watchdog(bgCtx) }()
	go func() { defer bg.Done(); c.silenceLoop(c.stop.done) }()
	go func() { defer bg.Done(); c.drainOnStop(pollCtx, stopBg) }()
	go func() { defer bg.Done(); c.topicLoop(bgCtx) }()
	if c.park != nil {
		bg.Add(1)
		go func() { defer bg.Done(); c.parkLoop(bgCtx) }()
	}

	c.poll(pollCtx)
	endPoll()
	err = c.shutdown(&bg)
	c.metrics.close()
	if uerr := c.reach.neverReached(); uerr != nil {
		err = errors.Join(uerr, err)
	}
	c.logShutdownEnd(err)
	return err
}

// poll is the poll loop: fetch, dispatch to lanes, allow a rebalance.
func (c *Consumer) poll(ctx context.Context) {
	for ctx.Err() == nil {
		fs := c.client.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() {
			c.client.AllowRebalance()
			return
		}
		c.noteUnknownTopicIDs(fs)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.logPollError(t, p, err)
			}
		})
		c.dispatch(fs)
		c.client.AllowRebalance()
	}
	c.client.AllowRebalance()
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

// Stats returns a snapshot of the consumer's counters and of every owned
// partition. It is safe to call at any time, from any goroutine.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	out := Stats{
		ActiveSessions:     int(c.lanes.alive.Load()),
		Processed:          s.processed.Load(),
		Retries:            s.retries.Load(),
		DeadLetterFailures: s.dlqFailures.Load(),
		DeadLetterBlocked:  s.dlqBlocked.Load(),
		Truncations:        s.truncations.Load(),
		Filtered:           s.filtered.Load(),
		SkippedDone:        s.skippedDone.Load(),
		Panics:             s.panics.Load(),
		SlowHandlers:       s.slowHandlers.Load(),
		Rebalances:         s.rebalances.Load(),
		Stalls:             s.stalls.Load(),
		RevokeOverruns:     s.revokeOverruns.Load(),
		SilenceHolds:       int64(c.member.holds.Load()),
		Commits:            s.commits.Load(),
		CommitFailures:     s.commitFailures.Load(),
		Breaker:            breakerStats(c.brk, time.Now()),
	}
	if n := out.Commits + out.CommitFailures; n > 0 {
		out.CommitLatency = time.Duration(s.commitNanos.Load() / n)
	}
	s.dlqMu.Lock()
	out.DeadLettered = s.dlq
	out.DeadLetteredByReason = make(map[Reason]int64, len(s.dlqByWhy))
	for k, v := range s.dlqByWhy {
		out.DeadLetteredByReason[k] = v
	}
	s.dlqMu.Unlock()
	now := time.Now()
	out.WorkHeld = c.held.Read(now).On.String()
	out.Partitions = []PartitionStats{}
	for _, p := range c.own.all() {
		out.Partitions = append(out.Partitions, p.stats(now))
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	c.diagnose(&out)
	return out
}
