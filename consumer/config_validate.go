package consumer

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/lanesdev/lanes/tracing"
)

// Config's one validation: each bad field named (ErrConfig), defaults
// filled in.

// validate checks cfg and returns a copy with defaults filled in.
func (cfg Config) validate() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return cfg, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if len(cfg.Brokers) == 0 {
		return bad("Brokers", "at least one seed broker is required")
	}
	for i, b := range cfg.Brokers {
		if b == "" {
			return bad("Brokers", "entry %d is empty", i)
		}
	}
	if cfg.Group == "" {
		return bad("Group", "required")
	}
	if len(cfg.Topics) == 0 {
		return bad("Topics", "at least one topic is required")
	}
	for i, t := range cfg.Topics {
		if t == "" {
			return bad("Topics", "entry %d is empty", i)
		}
		if j := slices.Index(cfg.Topics, t); j < i {
			return bad("Topics", "%q is listed twice (entries %d and %d)", t, j, i)
		}
		if t == cfg.DeadLetterTopic {
			return bad("DeadLetterTopic", "%q is also a consumed topic", t)
		}
	}
	if cfg.DeadLetterTopic == "" && !cfg.Retry.Forever {
		return bad("DeadLetterTopic", "required unless Retry.Forever is set (records that fail permanently need somewhere to go)")
	}
	if cfg.DeadLetterTopic == "" && cfg.SkipStalled {
		return bad("SkipStalled", "needs DeadLetterTopic: a stalled record is skipped by writing it there; set DeadLetterTopic or turn SkipStalled off")
	}
	for i, m := range cfg.Middleware {
		if m == nil {
			return bad("Middleware", "entry %d is nil", i)
		}
	}
	if cfg.StartOffset != StartEarliest && cfg.StartOffset != StartLatest {
		return bad("StartOffset", "unknown value %d", cfg.StartOffset)
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"Shards", &cfg.Shards, DefaultShardsPerCPU * runtime.GOMAXPROCS(0)},
		{"MaxBufferedRecords", &cfg.MaxBufferedRecords, DefaultMaxBufferedRecords},
		{"MaxPollRecords", &cfg.MaxPollRecords, DefaultMaxPollRecords},
		{"MaxCommitMetadataBytes", &cfg.MaxCommitMetadataBytes, DefaultMaxCommitMetadataBytes},
		{"MaxBatch", &cfg.MaxBatch, DefaultMaxBatch},
		{"MaxConcurrency", &cfg.MaxConcurrency, DefaultMaxConcurrency},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return bad(f.name, "must not be negative, got %d", *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HandlerTimeout", &cfg.HandlerTimeout, DefaultHandlerTimeout},
		{"FetchMaxWait", &cfg.FetchMaxWait, DefaultFetchMaxWait},
		{"CommitInterval", &cfg.CommitInterval, DefaultCommitInterval},
		{"CommitTimeout", &cfg.CommitTimeout, DefaultCommitTimeout},
		{"RevokeTimeout", &cfg.RevokeTimeout, DefaultRevokeTimeout},
		{"ShutdownTimeout", &cfg.ShutdownTimeout, DefaultShutdownTimeout},
		{"LeaveTimeout", &cfg.LeaveTimeout, DefaultLeaveTimeout},
		{"StallTimeout", &cfg.StallTimeout, DefaultStallTimeout},
	}
	for _, f := range durs {
		if *f.v < 0 {
			return bad(f.name, "must not be negative, got %v", *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	r, err := cfg.Retry.withDefaults()
	if err != nil {
		return cfg, err
	}
	cfg.Retry = r
	if cfg.Breaker.Enabled {
		if cfg.Breaker, err = cfg.Breaker.withDefaults(); err != nil {
			return cfg, err
		}
	} else if cfg.Breaker != (BreakerPolicy{}) {
		return bad("Breaker", "fields are set but Breaker.Enabled is false: set Enabled to turn the breaker on, or leave the policy empty")
	}
	if cfg.Growth, err = cfg.Growth.withDefaults(); err != nil {
		return cfg, err
	}
	if !cfg.Park.Enabled && cfg.Park != (ParkPolicy{}) {
		return bad("Park", "fields are set but Park.Enabled is false: set Enabled to turn parking on, or leave the policy empty")
	}
	if err := validatePark(&cfg); err != nil {
		return cfg, err
	}
	if err := validateOrder(&cfg); err != nil {
		return cfg, err
	}
	if cfg.Control.Enabled {
		if cfg.Control, err = cfg.Control.withDefaults(); err != nil {
			return cfg, err
		}
	} else if cfg.Control != (ControlPolicy{}) {
		return bad("Control", "fields are set but Control.Enabled is false: set Enabled to turn per-session control on, or leave the policy empty")
	}
	if cfg.Throttle, err = cfg.Throttle.validate(); err != nil {
		return cfg, err
	}
	if cfg.Transactions.Enabled {
		if err := validateTransactions(&cfg); err != nil {
			return cfg, err
		}
	} else if cfg.Transactions != (TransactionPolicy{}) {
		return bad("Transactions", "fields are set but Transactions.Enabled is false: set Enabled to turn the transactional mode on, or leave the policy empty")
	}
	if cfg.Slog != nil {
		if cfg.Logger != nil {
			return bad("Slog", "set Logger or Slog, not both")
		}
		l := tracing.FromSlog(cfg.Slog)
		cfg.Logger = &l
	}
	if cfg.Logger == nil {
		l := tracing.FromSlogDefault()
		cfg.Logger = &l
	}
	return cfg, nil
}

// validatePark checks the parts of cfg parking depends on; cfg.Park has
// its defaults. It does not compare Park.After and Park.AfterAttempts with
// the in-lane retry budget (Retry): with parking on, a record whose
// in-lane budget ends first is parked then (ParkPolicy.After), so no
// combination dead-letters what parking would take. A check could not be
// exact anyway: the budget by time ends when the next backoff wait (with
// its jitter) would pass Retry.MaxElapsed, and starts again after the
// breaker held the record, so a MaxElapsed above Park.After still ended
// first at times.
func validatePark(cfg *Config) error {
	if !cfg.Park.Enabled {
		return nil
	}
	p, err := cfg.Park.withDefaults()
	if err != nil {
		return err
	}
	cfg.Park = p
	for _, t := range cfg.Topics {
		park := t + p.TopicSuffix
		for _, u := range cfg.Topics {
			if u == park {
				return fmt.Errorf("%w: Park.TopicSuffix: the park topic %q of %q is also a consumed topic", ErrConfig, park, t)
			}
		}
		if park == cfg.DeadLetterTopic {
			return fmt.Errorf("%w: Park.TopicSuffix: the park topic %q of %q is the dead-letter topic", ErrConfig, park, t)
		}
	}
	if cfg.DeadLetterTopic == "" {
		return fmt.Errorf("%w: DeadLetterTopic: required with Park.Enabled (a parked record that spends its retries is dead-lettered)", ErrConfig)
	}
	return nil
}

// validateOrder checks cfg.Order against the consumed topics.
func validateOrder(cfg *Config) error {
	cfg.Order = maps.Clone(cfg.Order) // the caller's map may change after New
	for topic, o := range cfg.Order {
		if o < OrderSession || o > OrderNone {
			return fmt.Errorf("%w: Order: topic %q: unknown order %d (OrderSession, OrderPartition or OrderNone)", ErrConfig, topic, int(o))
		}
		if !slices.Contains(cfg.Topics, topic) {
			return fmt.Errorf("%w: Order: topic %q is not consumed (Topics %q)", ErrConfig, topic, cfg.Topics)
		}
	}
	return nil
}

// validateTransactions checks what the transactional mode rules out of
// cfg, and fills in cfg.Transactions' defaults.
func validateTransactions(cfg *Config) error {
	switch {
	case cfg.Park.Enabled:
		return fmt.Errorf("%w: Park: not supported with Transactions: a parked record's copies and markers live in the park topic "+
			"outside the transaction, so a parked input's outputs could not commit with it; turn one of them off", ErrConfig)
	case cfg.SkipStalled:
		return fmt.Errorf("%w: SkipStalled: not supported with Transactions: a stalled record's dead-letter copy is written "+
			"outside the transaction, while its handler's outputs may still commit; turn SkipStalled off", ErrConfig)
	}
	p, err := cfg.Transactions.withDefaults(cfg.Group, cfg.CommitInterval)
	cfg.Transactions = p
	return err
}
