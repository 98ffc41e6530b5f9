package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
	"github.com/lanesdev/lanes/consumer/internal/hold"
	"github.com/lanesdev/lanes/tracing"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Making a Consumer: New checks the config and the handler and wires the
// parts consumer.go names; clientOpts are the options of the group client
// Run starts.

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
	c.gateLanes()
	c.makeShards()
	return c, nil
}

// build makes a consumer over a validated cfg, without its handler and
// lanes.
func build(cfg Config) (*Consumer, error) {
	c := &Consumer{cfg: cfg, own: newOwners(), flow: newFlow(),
		reach: newBrokerWatch(cfg.Brokers, cfg.Logger), member: newMembership(cfg.Group, cfg.Logger), topics: newTopicWatch(&cfg)}
	c.flow.drain = c.drainStash
	c.grow = newGrowth()
	c.turns = newTurns(cfg.MaxConcurrency)
	if cfg.Transactions.Enabled {
		c.tx = &txn{txID: cfg.Transactions.ID, refusals: refusals{dlq: cfg.DeadLetterTopic}} // its session is made by Run
	}
	if cfg.Control.Enabled || cfg.Throttle.on() {
		t := cfg.Throttle
		c.ctl = control.NewGate(cfg.Group, control.Limit(t.Session), func(res string) control.Limit { return control.Limit(t.limitOf(res)) })
		c.alarms = control.NewAlarms()
	}
	if cfg.Control.Enabled {
		c.ctlLog = newControlLog(&c.cfg)
	}
	c.held = &hold.Clock{}
	c.statusToken = newStatusToken()
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

// gateLanes puts the control gate before the lanes' heads, when on.
func (c *Consumer) gateLanes() {
	if c.ctl != nil {
		c.lanes.admit, c.lanes.joins = c.admitLane, c.joinsBatch
	}
}

func (c *Consumer) makeShards() {
	c.shards = make([]*shard, c.cfg.Shards)
	for i := range c.shards {
		c.shards[i] = &shard{lanesOf: c.lanes, lanes: map[string]*lane{}}
	}
}

// clientOpts are the group client's options, consuming the configured
// topics; Config.ClientOptions come last.
func (c *Consumer) clientOpts() []kgo.Opt {
	return append(append(append(c.baseOpts(), kgo.ConsumeTopics(c.cfg.Topics...)), c.cfg.ClientOptions...), c.wire...)
}

// groupOpts are clientOpts but the topics consumed: a client without any
// does not join its group until given some.
func (c *Consumer) groupOpts() []kgo.Opt {
	return append(append(c.baseOpts(), c.cfg.ClientOptions...), c.wire...)
}

// baseOpts are lanes' own options of the group client.
func (c *Consumer) baseOpts() []kgo.Opt {
	reset := kgo.NewOffset().AtStart()
	if c.cfg.StartOffset == StartLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.WithContext(c.clientCtx),
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
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
		kgo.OnPartitionsAssigned(c.fromCurrent(c.member.assigned(c.onAssigned))),
		kgo.OnPartitionsRevoked(c.fromCurrent(c.member.revoked(c.onRevoked))),
		kgo.OnPartitionsLost(c.fromCurrent(c.member.lost(c.onLost))),
		kgo.AdjustFetchOffsetsFn(c.adjustStarts),
		// Before ClientOptions: a logger passed there replaces this one,
		// hooks passed there run after lanes'.
		kgo.WithLogger(newKgoLogger(c.log(), "consumer")),
		kgo.WithHooks(c.reach, c.member),
	}
	return opts
}
