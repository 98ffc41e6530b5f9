package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"

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

	own    *owners
	shards []*shard
	flow   *flow
	// client is the group client, set once it exists; a transactional
	// member fenced swaps it for a new one (tx_rejoin.go).
	client  atomic.Pointer[kgo.Client]
	dlq     *deadLetters // nil without a DeadLetterTopic
	stats   counters
	tracer  *tracing.Tracer
	metrics *metrics
	brk     *breaker.Breaker // nil unless Config.Breaker.Enabled
	// probeWork is the running probe's record as the lanes know it, kept
	// by the breaker's gate (gate.go) to name a probe given up as
	// hung.
	probeWork atomic.Pointer[probeRec]
	park      *parkIO  // nil unless Config.Park.Enabled
	grow      *growth  // what the member knows of its topics' partition counts (growth.go)
	turns     *turns   // the handler attempts' turns (Config.MaxConcurrency); nil: no bound
	busy      busyness // the attempts running, averaged (Stats.Busy)
	// ctl is per-session control and throttling (control.go), nil when
	// both are off; alarms wakes the lanes its rates hold, ctlLog reads
	// the control topic (Config.Control; nil when off).
	ctl    *control.Gate
	alarms *control.Alarms
	ctlLog *controlLog
	// held measures the time the member's work is held as a whole (a
	// silence hold, an open breaker), which the stall watch does not count
	// (stall_clock.go).
	held *hold.Clock
	// parkLoopQueued counts the parked retries the park loop queued (the
	// others follow a done head at once: parkMark).
	parkLoopQueued atomic.Int64

	reach   *brokerWatch // whether any broker answers (connectivity.go)
	member  *membership  // whether the member is in its group (membership.go)
	wire    []kgo.Opt    // the group client's last options, set by Run (membership_answers.go)
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
	userMu  sync.Mutex
	stop    stopper // when the shutdown began, and what its drain left
	takeUps takeUps // partition take-ups under way (stopper.go)
	// statusToken is the status page's anti-forgery token
	// (status_actions.go).
	statusToken string
	ran         atomic.Bool
	returned    atomic.Bool // Run returned
	tx          *txn        // the transactional mode (Config.Transactions); nil: off
	crashed     atomic.Bool // set by tests to stop committing, as a killed process would
}

func (c *Consumer) log() *zerolog.Logger { return c.cfg.Logger }

// controlLog is where the member is in the control topic. It is used by
// Run (the load) and then by the control loop only.
type controlLog struct {
	cfg     *Config
	topic   string
	id      kadm.TopicID // the incarnation read; a topic made again starts over
	next    int64        // the next offset to read
	missing atomic.Bool  // the topic was missing at the last read (logged once)
	kick    chan struct{}
	loaded  atomic.Bool                   // read to its end before the first poll
	failed  atomic.Pointer[controlFailed] // the reads failing, nil when the last one succeeded
}

// controlFailed is since when reading the control topic fails, and the
// last error.
type controlFailed struct {
	since time.Time
	err   string
}

func newControlLog(cfg *Config) *controlLog {
	return &controlLog{cfg: cfg, topic: cfg.Control.Topic, kick: make(chan struct{}, 1)}
}
