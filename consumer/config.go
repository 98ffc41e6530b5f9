package consumer

import (
	"log/slog"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// StartOffset says where a group with no committed offset for a partition
// starts reading it.
type StartOffset int

const (
	// StartEarliest reads from the oldest retained record (the default):
	// a new group processes the topic's whole history.
	StartEarliest StartOffset = iota
	// StartLatest reads only records produced after the partition is first
	// assigned to the group (from the end offset the client lists then).
	StartLatest
)

// Middleware wraps a Handler with behaviour of its own around every attempt:
// a tighter timeout, a per-session rate limit, metrics, or deduplication by
// event ID (module github.com/lanesdev/lanes/dedup). What it returns is what
// the consumer calls; an error it returns is treated like the handler's own
// (retried, or dead-lettered when Permanent).
type Middleware func(Handler) Handler

// Config configures a [Consumer]. The zero value of every field except
// Brokers, Group, Topics and DeadLetterTopic means its documented default.
//
// The fields come in the order a service needs them: the four it must
// set, then logging and what most services set, the policies for a record
// that fails, traces and metrics, franz-go's options (TLS, SASL), and last
// the Tuning fields, whose defaults suit most services; each of those
// names the Default* constant its zero value means.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Group is the consumer group. Required.
	Group string
	// Topics are the topics to consume. Required, unless the handler given
	// to New is a [TopicHandlers], whose topics are then consumed. A
	// session's records from several topics share one lane, so they are
	// handled in order of arrival, one at a time.
	Topics []string
	// DeadLetterTopic receives records that failed permanently or spent
	// their retry budget. Required unless Retry.Forever is set, in which
	// case no record is ever dead-lettered.
	DeadLetterTopic string

	// Slog receives lanes' log lines, never one per successful message
	// (see the package doc's Logs), and franz-go's warnings and errors.
	// Default: slog.Default() as it is when each line is logged (until
	// slog.SetDefault, the log package's stderr, INFO and above). To log
	// nothing, set slog.New(slog.DiscardHandler).
	Slog *slog.Logger
	// SessionKey returns the session ID of a record. Default: the record
	// key as a string. Records with a nil key (and SessionKey unset) have
	// no session: all of them from one partition share one lane, keyed by
	// topic and partition, so they keep their partition order; their
	// Message.SessionID is "".
	SessionKey func(*kgo.Record) string
	// Order sets, per consumed topic, how its records are ordered:
	// OrderSession (a session's records one at a time, in order; the
	// default for a topic not listed), OrderPartition (a partition's one at
	// a time, whatever their session) or OrderNone (every record as soon as
	// a handler is free; with MaxConcurrency, up to it). Commits never pass
	// an unfinished record in any order. Default: every topic OrderSession.
	Order map[string]Order
	// StartOffset is where a partition with no committed offset starts,
	// and also where one whose committed offset is out of range starts
	// (below the log start after retention, or past the end after a
	// truncation). The start position is committed at once, so a member
	// that takes the partition over later starts there too, even if no
	// record arrived meanwhile. Default: StartEarliest.
	StartOffset StartOffset
	// Middleware wraps the handler given to New, in order: the first entry
	// is the outermost, so it sees each attempt first and its outcome last
	// (Middleware{a, b} runs a(b(h))). Each attempt (retries included) goes
	// through the whole chain, under HandlerTimeout. Default: none.
	Middleware []Middleware
	// Filter, when set, is called for every fetched record before it
	// reaches a lane; returning false drops the record: it counts as done
	// at once and is counted in Stats.Filtered. Default: keep everything.
	Filter func(*kgo.Record) bool

	// Policies: what happens to a record whose handler fails.
	//
	// Retry is the policy for handler errors: backoff, and the budget
	// after which the record is dead-lettered. Default: the zero
	// RetryPolicy (see its Default* constants).
	Retry RetryPolicy
	// Park moves a session whose record keeps failing, with its later
	// records, to a park topic so its partition keeps flowing, and retries
	// it from there in order
	// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md).
	// Default: off (see ParkPolicy and its Default* constants).
	Park ParkPolicy
	// Breaker is the circuit breaker over handler attempts across
	// sessions: while most of them fail, fetching pauses, lanes hold their
	// records without spending retry budget and one probe runs at a time.
	// Default: off (see BreakerPolicy and its Default* constants).
	Breaker BreakerPolicy
	// Growth keeps each session's order when a consumed topic's partition
	// count grows (records of lanes' producer). Default: on (see
	// GrowthPolicy and its Default* constants).
	Growth GrowthPolicy
	// Control lets an operator pause, resume and rate-limit one session at
	// run time, from any machine. Default: off (see ControlPolicy).
	Control ControlPolicy
	// Throttle limits the pace of sessions and of the resources their
	// records use. Default: none (see ThrottlePolicy).
	Throttle ThrottlePolicy
	// Transactions makes the pipeline exactly-once: a handler's outputs
	// (Message.Output) commit in one Kafka transaction with its input's
	// offset. Default: off (see TransactionPolicy).
	Transactions TransactionPolicy

	// Traces and metrics (OpenTelemetry).
	//
	// TracerProvider creates the process spans (one per handler attempt).
	// Default: otel.GetTracerProvider(), a no-op until the application
	// sets a global provider.
	TracerProvider trace.TracerProvider
	// Propagator reads the producer's trace context from record headers.
	// Default: W3C trace context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
	// TraceAsChild makes each process span a child of the producer's span
	// as well as linking to it. Default: false (link only: each consumer
	// trace has its own root, as the messaging conventions recommend).
	TraceAsChild bool
	// MeterProvider receives lanes' metrics, listed in
	// https://github.com/lanesdev/lanes/blob/main/docs/observability.md#metrics.
	// Default: otel.GetMeterProvider(), a no-op until the application sets
	// a global provider.
	MeterProvider metric.MeterProvider
	// StatusActions turns on the actions of the status page
	// (HealthHandler's status): releasing a held session, pausing and
	// resuming a session (with Control on). Each is a POST that must carry
	// the page's anti-forgery token and come from the page's own origin,
	// and is logged with who asked. Serve the page on a private port.
	// Default: off (the page is read-only).
	StatusActions bool

	// ClientOptions are passed to franz-go after lanes' own options, for
	// TLS, SASL, timeouts and anything else franz-go offers; they apply to
	// the consumer's client and to the dead-letter producer's. Not to be
	// passed: kgo.WithContext (lanes cancels its own to bound the group
	// leave) and kgo.ConsumeResetOffset (use StartOffset: lanes commits the
	// start position it lists, which must be where the client starts).
	// Options that would break lanes' guarantees (auto-commit, a different
	// group or topics) must not be passed. The consumer reads at
	// read_committed; a kgo.FetchIsolationLevel here wins. The group
	// client's dial function (a kgo.Dialer here, or franz-go's own with a
	// DialTLSConfig and DialTimeout here) is wrapped so that its
	// connections read the coordinator's answers to heartbeats, error
	// codes included, for the silence hold; Run reads it from a client
	// made of these options without topics and closed at once, so hooks
	// here see one more client made and closed, and a connection handed
	// to a hook (kgo.HookBrokerConnect) is the wrapper, not a *tls.Conn.
	ClientOptions []kgo.Opt

	// Tuning: the defaults suit most services. The zero value of each
	// field is the Default* constant its doc names.
	//
	// HandlerTimeout bounds each handler attempt through its context; a
	// handler that ignores its context is reported and its lane waits for
	// it to return. It may exceed RevokeTimeout (the defaults do): a revoke
	// cancels the attempts of its partitions before it gives them up, and
	// a shutdown after ShutdownTimeout, whatever is left of HandlerTimeout.
	// Default: [DefaultHandlerTimeout].
	HandlerTimeout time.Duration
	// MaxConcurrency bounds the handler attempts running at once across the
	// member (a database pool's size, say), 0 for no bound. Attempts wait
	// for a turn in the order they asked, so a session with many records
	// takes one turn at a time and others go between its records. A turn
	// is taken before the attempt starts: HandlerTimeout, the watchdog and
	// the handler metrics count from the turn, not from the wait. A record
	// waiting for a turn holds its partition's watermark like a running
	// one: size StallTimeout for the wait a full member makes. Must not be
	// negative. Default: [DefaultMaxConcurrency] (no bound).
	MaxConcurrency int
	// MaxBatch bounds the messages handed to one call of a BatchHandler
	// (see NewBatch): up to MaxBatch consecutive messages of one session
	// that are already waiting in its lane. Ignored by New. Must not be
	// negative. Default: [DefaultMaxBatch].
	MaxBatch int
	// Shards is the number of dispatch shards (lock stripes over the
	// session → lane maps). Default: [DefaultShardsPerCPU] × GOMAXPROCS.
	Shards int
	// MaxBufferedRecords bounds the records of one partition held in
	// memory: queued in lanes, in flight, and finished above an unfinished
	// one (a record holding the watermark holds every record fetched after
	// it). When a partition reaches it, it hands no more records to lanes
	// until the count falls to half; records fetched meanwhile wait in the
	// partition (Stats' Stashed), and fetching pauses once half the bound
	// waits. At most 1.5 × MaxBufferedRecords + 2 × MaxPollRecords records
	// of a partition are in memory (a poll admitted just below the bound,
	// another stashed just below half of it), plus franz-go's fetch buffer.
	// Default: [DefaultMaxBufferedRecords].
	MaxBufferedRecords int
	// MaxPollRecords is the most records taken from the client per poll.
	// Default: [DefaultMaxPollRecords].
	MaxPollRecords int
	// FetchMaxWait is how long the broker may hold a fetch that has no new
	// data. A resumed partition joins the next fetch only after the
	// in-flight one returns, so this bounds how long backpressure keeps a
	// drained partition idle. A kgo.FetchMaxWait in ClientOptions wins
	// over it (ClientOptions come last). Default: [DefaultFetchMaxWait]
	// (franz-go's own default is 5s).
	FetchMaxWait time.Duration
	// CommitInterval is how often the watermarks of owned partitions are
	// committed (only those that moved). Default: [DefaultCommitInterval].
	CommitInterval time.Duration
	// CommitTimeout bounds one commit request, and the shutdown's final
	// commit and dead-letter flush together. Default: [DefaultCommitTimeout].
	CommitTimeout time.Duration
	// RevokeTimeout bounds how long a revoke waits for in-flight handlers
	// of the revoked partitions before committing and letting the
	// rebalance go on. A tenth of it before the end (at most 5s), the
	// contexts of the attempts still running are cancelled, so a handler
	// that honours its context has returned when the partition moves; one
	// that does not is counted in Stats.RevokeOverruns. Keep RevokeTimeout
	// + CommitTimeout below the group's rebalance timeout
	// (kgo.RebalanceTimeout, 60s by default; Run warns otherwise).
	// Default: [DefaultRevokeTimeout].
	RevokeTimeout time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight handlers
	// after its context is cancelled (counted from the cancellation, also
	// while a revoke drains); then their contexts are cancelled. Default:
	// [DefaultShutdownTimeout].
	ShutdownTimeout time.Duration
	// LeaveTimeout bounds how long Run waits to leave the group after its
	// final commit; a leave can wait for a rebalance under way. Default:
	// [DefaultLeaveTimeout].
	LeaveTimeout time.Duration
	// StallTimeout reports a partition whose watermark has not moved for
	// this long while a record holds it: a warning, Stats.Stalls and
	// PartitionStats.Stalled. Time during which this member's work was
	// held as a whole (a silence hold: its group coordinator answers no
	// heartbeat; an open Breaker) does not count: a hold is not a stall
	// (PartitionStats.StalledFor). Default: [DefaultStallTimeout].
	StallTimeout time.Duration
	// SkipStalled, when set, also writes the record holding a stalled
	// partition to the DLQ (reason "stalled") and counts its offset done, so
	// the partition moves on. Its lane still waits for the stuck handler to
	// return before running that session's next message. Nothing is
	// skipped while this member's work is held, nor when the hold ends.
	// With parking on, only a record whose handler attempt is running (a
	// hung or slow handler) is skipped: one failing between attempts is
	// parked by its lane (Park.After, Park.AfterAttempts), its session's
	// order kept. It needs DeadLetterTopic (New refuses it without one).
	// Default: false (report only).
	SkipStalled bool
	// DisableCompletedOffsets stops recording, in the commit metadata, the
	// offsets completed above the committed watermark. With it set, a
	// restart reprocesses everything from the watermark. Default: false
	// (recorded, and skipped after a restart or rebalance).
	DisableCompletedOffsets bool
	// MaxCommitMetadataBytes caps the commit metadata. Keep it at or below
	// the broker's offset.metadata.max.bytes (4096 by default); when the
	// completed offsets do not fit, only the lowest of them are recorded.
	// Default: [DefaultMaxCommitMetadataBytes].
	MaxCommitMetadataBytes int

	// Logger is the zerolog alternative to Slog (set one of them, not
	// both): lanes logs through zerolog inside, so a service on zerolog
	// may pass its logger here as it is.
	//
	// Deprecated: set Slog; a zerolog logger goes there as
	// slog.New(zerolog.NewSlogHandler(l)). Logger will be removed.
	Logger *zerolog.Logger
}

// Defaults of the Config tuning fields, applied by New to zero fields.
const (
	DefaultHandlerTimeout         = time.Minute
	DefaultMaxBatch               = 64
	DefaultMaxConcurrency         = 0 // no bound
	DefaultShardsPerCPU           = 4
	DefaultMaxBufferedRecords     = 4096
	DefaultMaxPollRecords         = 512
	DefaultFetchMaxWait           = 100 * time.Millisecond
	DefaultCommitInterval         = time.Second
	DefaultCommitTimeout          = 10 * time.Second
	DefaultRevokeTimeout          = 30 * time.Second
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultLeaveTimeout           = 5 * time.Second
	DefaultStallTimeout           = 5 * time.Minute
	DefaultMaxCommitMetadataBytes = 4096
)
