package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
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
	// by the breaker's gate (gate.go) to name a probe given up as
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
