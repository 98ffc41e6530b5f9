package consumer

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a consumer's pipeline.
type Stats struct {
	// Partitions has one entry per owned partition, sorted by topic and
	// partition.
	Partitions []PartitionStats `json:"partitions"`
	// ActiveSessions is the number of sessions with work (lanes: records
	// queued or running).
	ActiveSessions int `json:"active_sessions"`
	// WaitingForTurn is the number of handler attempts waiting for a turn
	// under Config.MaxConcurrency (0 without it).
	WaitingForTurn int `json:"waiting_for_turn"`
	// Processed counts records the handler finished successfully.
	Processed int64 `json:"processed"`
	// Retries counts handler attempts that failed and were retried.
	Retries int64 `json:"retries"`
	// DeadLettered counts records written to the dead-letter topic, and
	// DeadLetteredByReason splits it by lanes-dlq-reason.
	DeadLettered         int64            `json:"dead_lettered"`
	DeadLetteredByReason map[Reason]int64 `json:"dead_lettered_by_reason"`
	// DeadLetterFailures counts failed DLQ writes (each was retried).
	DeadLetterFailures int64 `json:"dead_letter_failures"`
	// DeadLetterBlocked counts records whose dead-letter copy failed with
	// an error that is not retriable (too large for the DLQ topic, not
	// authorized): each holds its partition until an operator acts.
	DeadLetterBlocked int64 `json:"dead_letter_blocked"`
	// Truncations counts fetches that found their partition's log
	// truncated (offsets reused after an unclean leader election).
	Truncations int64 `json:"truncations"`
	// Filtered counts records dropped by Config.Filter.
	Filtered int64 `json:"filtered"`
	// SkippedDone counts records skipped because the commit metadata said
	// they were completed before a restart or rebalance.
	SkippedDone int64 `json:"skipped_done"`
	// Panics counts handler panics recovered.
	Panics int64 `json:"panics"`
	// SlowHandlers counts attempts that ran past HandlerTimeout (handlers
	// ignoring their context).
	SlowHandlers int64 `json:"slow_handlers"`
	// Stalls counts partitions reported stalled (see Config.StallTimeout).
	Stalls int64 `json:"stalls"`
	// RevokeOverruns counts partitions a revoke gave up while a handler of
	// theirs still ran: it ignored the cancellation of its context, so the
	// partition's next owner may have run its session at the same time.
	RevokeOverruns int64 `json:"revoke_overruns"`
	// SilenceHolds counts the times this member held its work (handlers
	// cancelled, none started) because its group coordinator answered no
	// heartbeat for four fifths of the session timeout.
	SilenceHolds int64 `json:"silence_holds"`
	// WorkHeld names what holds this member's work as a whole now:
	// "silence hold" (its group coordinator takes no heartbeat),
	// "breaker open", both, or "" when nothing does. While it is set the
	// stall clocks are paused and no partition is stalled
	// (PartitionStats.StalledFor).
	WorkHeld string `json:"work_held"`
	// HotSessions are the sessions with the deepest lanes (records queued
	// or running), deepest first, at most MaxHotSessions: the keys to look
	// at when lag grows.
	HotSessions []SessionStats `json:"hot_sessions"`
	// Rebalances counts partition assignments received.
	Rebalances int64 `json:"rebalances"`
	// Commits and CommitFailures count commit requests; CommitLatency is
	// the mean duration of a commit request.
	Commits        int64         `json:"commits"`
	CommitFailures int64         `json:"commit_failures"`
	CommitLatency  time.Duration `json:"commit_latency"`
	// Breaker is the circuit breaker's state (Config.Breaker); its zero
	// value when the breaker is off.
	Breaker BreakerStats `json:"breaker"`
	// Growing lists the consumed topics whose partition count changed
	// and whose change is not settled, with this member's sessions
	// waiting for their old partitions (Config.Growth).
	Growing []GrowthStats `json:"growing"`
	// MovedReleased counts the waits of moved sessions that ended with
	// their old partitions handled.
	MovedReleased int64 `json:"moved_released"`
	// MovedParked counts the waits of moved sessions that ended with the
	// session parked on its new partition, behind its records parked on an
	// old one (retried once those are done).
	MovedParked int64 `json:"moved_parked"`
	// Control is per-session control's state (Config.Control,
	// Config.Throttle).
	Control ControlStats `json:"control"`
	// Transactions is the transactional mode's count (Config.Transactions;
	// zero when off).
	Transactions TxStats `json:"transactions"`
	// Busy is how many handler attempts the member runs at once,
	// averaged over about ten seconds (sampled at each watchdog tick), and
	// BusyRatio is Busy ÷ MaxConcurrency: how much of what the member may
	// run it runs (0 without MaxConcurrency). The autoscaling signal, with
	// each partition's WatermarkAge (its lag in time).
	Busy      float64 `json:"busy"`
	BusyRatio float64 `json:"busy_ratio"`
}

// PartitionStats describes one owned partition.
type PartitionStats struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Watermark is the next offset to commit: every lower fetched offset
	// is done. -1 before anything was fetched.
	Watermark int64 `json:"watermark"`
	// Committed is the last offset this consumer committed; -1 if none yet.
	Committed int64 `json:"committed"`
	// HighWatermark is the partition's end offset as of the latest fetch
	// response; -1 until the first fetch.
	HighWatermark int64 `json:"high_watermark"`
	// LastStableOffset is the end of what a read_committed reader may
	// read as of the latest fetch: below HighWatermark while a
	// transaction of the partition is open. -1 until the first fetch.
	LastStableOffset int64 `json:"last_stable_offset"`
	// Lag is HighWatermark − Watermark: records not yet done. -1 when
	// unknown.
	Lag int64 `json:"lag"`
	// Buffered is the number of records queued in lanes, not started.
	Buffered int `json:"buffered"`
	// InFlight is the number of records whose handler is running.
	InFlight int `json:"in_flight"`
	// Pending is the number of fetched records at or above the watermark
	// (unfinished, or finished above an unfinished one).
	Pending int `json:"pending"`
	// Paused reports whether backpressure holds the partition: it holds
	// MaxBufferedRecords (until half are done, no record reaches a lane),
	// or its fetching is paused.
	Paused bool `json:"paused"`
	// Stashed is the number of records fetched while the partition was
	// full, waiting to be handed to lanes (not in Pending).
	Stashed int `json:"stashed"`
	// Stalled reports whether the watermark has been held by one record
	// for StallTimeout or longer, not counting the time this member's work
	// was held as a whole (Stats.WorkHeld): StalledFor ≥ StallTimeout. It
	// is false while such a hold is in force: a hold is not a stall.
	Stalled bool `json:"stalled"`
	// StalledFor is the stall clock: how long the record at HeldAt has
	// held the watermark, less the time this member's work was held
	// meanwhile (a silence hold, an open breaker); it pauses while one is
	// in force and goes on after it. 0 when nothing is pending. Sampled by
	// the watchdog, like WatermarkAge.
	StalledFor time.Duration `json:"stalled_for"`
	// HeldAt is the offset of the record holding the watermark (-1 when
	// nothing is pending) and HeldBySession its session, in every state
	// of that record: queued, running, waiting between retries, in its
	// dead-letter or park write, waiting for the breaker or a silence hold
	// ("" when it has no session key, or is in no lane yet: fetched, on
	// its way to one). WatermarkAge says for how long.
	HeldAt        int64  `json:"held_at"`
	HeldBySession string `json:"held_by_session"`
	// HeldWaiting is "paused" or "throttled" when the record holding the
	// watermark waits because its session is paused or held by a rate
	// (Config.Control, Config.Throttle): not a stall, Stalled is false
	// (https://github.com/lanesdev/lanes/blob/main/docs/control.md).
	HeldWaiting string `json:"held_waiting,omitempty"`
	// Draining reports that the partition is being revoked or shut down:
	// it starts nothing more and waits for its running handlers.
	Draining bool `json:"draining"`
	// DeadLetterBlockedAt is the offset of a record held here because its
	// dead-letter copy cannot be written (-1: none; the lowest such offset
	// when several fail); DeadLetterError is the last error of that write
	// and DeadLetterBlockedFor how long it has failed. They clear as soon
	// as the record is done by any path: its copy written (by its lane or
	// the stall skipper), its handler succeeding, skipped as stalled.
	DeadLetterBlockedAt  int64         `json:"dead_letter_blocked_at"`
	DeadLetterError      string        `json:"dead_letter_error"`
	DeadLetterBlockedFor time.Duration `json:"dead_letter_blocked_for"`
	// CommitError is the error of this partition's last commit when it
	// failed ("" once a commit of it succeeds, or it has nothing left to
	// commit), and CommitFailingFor how long its commits have failed.
	CommitError      string        `json:"commit_error"`
	CommitFailingFor time.Duration `json:"commit_failing_for"`
	// WatermarkAge is how long the watermark has not moved while records
	// are pending (0 when nothing is pending). Sampled by the watchdog, so
	// accurate to its interval (at most a second).
	WatermarkAge time.Duration `json:"watermark_age"`
	// Park describes the partition's parked sessions (Config.Park); its
	// zero value when parking is off.
	Park ParkStats `json:"park"`
}

type counters struct {
	pausedParked   atomic.Int64
	movedReleased  atomic.Int64
	movedParked    atomic.Int64
	processed      atomic.Int64
	retries        atomic.Int64
	filtered       atomic.Int64
	skippedDone    atomic.Int64
	panics         atomic.Int64
	slowHandlers   atomic.Int64
	dlqFailures    atomic.Int64
	dlqBlocked     atomic.Int64
	truncations    atomic.Int64
	rebalances     atomic.Int64
	stalls         atomic.Int64
	revokeOverruns atomic.Int64
	commits        atomic.Int64
	commitFailures atomic.Int64
	commitNanos    atomic.Int64

	dlqMu    sync.Mutex
	dlq      int64
	dlqByWhy map[Reason]int64
}

func (s *counters) deadLettered(reason Reason) {
	s.dlqMu.Lock()
	defer s.dlqMu.Unlock()
	if s.dlqByWhy == nil {
		s.dlqByWhy = map[Reason]int64{}
	}
	s.dlq++
	s.dlqByWhy[reason]++
}

// SessionStats describes one session with work.
type SessionStats struct {
	Session string `json:"session"`
	// Depth is the number of the session's records queued or running.
	Depth int `json:"depth"`
	// Running reports whether a record of the session is being handled,
	// and RunningFor for how long its current attempt has run.
	Running    bool          `json:"running"`
	RunningFor time.Duration `json:"running_for"`
}

// MaxHotSessions bounds Stats.HotSessions.
const MaxHotSessions = 10

// ParkStats describes the parked sessions of one partition.
type ParkStats struct {
	// Sessions parked, and of them Held (retry budget spent, ParkHold).
	Sessions int `json:"sessions"`
	Held     int `json:"held"`
	// Records parked, not yet done.
	Records int `json:"records"`
	// Oldest is the age of the oldest parked record.
	Oldest time.Duration `json:"oldest"`
	// Error is why the parked set could not be rebuilt (the partition then
	// starts nothing); "" normally.
	Error string `json:"error"`
	// WriteError is the error of a write to the park partition (a parked
	// copy or a marker) failing for WriteFailingFor, the longest failing
	// when several are: what waits for it holds the partition (a record
	// to park holds the watermark), and it is retried until it succeeds.
	// "" when no park write fails; it clears when that write succeeds or
	// the partition leaves this member.
	WriteError      string        `json:"write_error"`
	WriteFailingFor time.Duration `json:"write_failing_for"`
}

// GrowthStats is a consumed topic whose partition count changed, while
// its change is not settled
// (https://github.com/lanesdev/lanes/blob/main/docs/operations.md#adding-partitions-to-a-live-topic).
type GrowthStats struct {
	Topic string `json:"topic"`
	// Counts are the partition counts whose records may still be
	// unhandled, oldest first; the last is the topic's count now.
	Counts []int `json:"counts"`
	// Since is when the member first knew of the newest count.
	Since time.Time `json:"since"`
	// Waiting counts the sessions of this member's partitions waiting on
	// their new partition for the group to handle their records on their
	// old ones; OldestWait is the longest such wait, of OldestSession on
	// OldestPartition.
	Waiting         int           `json:"waiting"`
	OldestWait      time.Duration `json:"oldest_wait"`
	OldestSession   string        `json:"oldest_session"`
	OldestPartition int32         `json:"oldest_partition"`
	// OldestWaitsFor are the old partitions that wait is for.
	OldestWaitsFor []int32 `json:"oldest_waits_for"`
}

// ControlStats is per-session control's state on this member
// (Config.Control, Config.Throttle); its zero value when both are off.
type ControlStats struct {
	// Sessions lists the group's sessions an operator paused or limited,
	// as this member read them from the control topic, oldest first.
	Sessions []ControlledSession `json:"sessions"`
	// LanesPaused and LanesThrottled count this member's lanes waiting,
	// without a worker, for a paused session and for a rate.
	LanesPaused    int `json:"lanes_paused"`
	LanesThrottled int `json:"lanes_throttled"`
	// PausedParked counts the records parked because their session was
	// paused (with parking on): the first of each run, its session's later
	// records follow it to the park topic as a parked session's do.
	PausedParked int64 `json:"paused_parked"`
	// Buckets and Resources count the rate buckets of sessions and the
	// resources this member keeps (idle ones are forgotten).
	Buckets   int `json:"buckets"`
	Resources int `json:"resources"`
}

// ControlledSession is one session's setting in the control topic.
type ControlledSession struct {
	Topic   string `json:"topic"`
	Session string `json:"session"`
	// Paused: its records wait (or are parked) until it is resumed.
	Paused bool `json:"paused"`
	// Rate limits it to Rate records per second, in bursts of Burst; 0:
	// the default (ThrottlePolicy.Session), if any.
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
	// By, At and Reason say who set it, when and why; TopicID is the
	// topic's ID then.
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	TopicID string    `json:"topic_id,omitempty"`
	// Waiting counts this member's lanes waiting for it to resume (Stats
	// only).
	Waiting int `json:"waiting"`
}

// TxStats counts the transactional mode's work (Config.Transactions).
type TxStats struct {
	// Committed and Aborted count the transactions ended each way.
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	// Outputs counts the output records produced into transactions (a
	// dead-letter copy included), those of aborted ones too.
	Outputs int64 `json:"outputs"`
	// Rewinds counts the restarts of the member's partitions from the
	// group's commit after an abort.
	Rewinds int64 `json:"rewinds"`
	// Rejoins counts the times the member left its group and joined
	// again with a new producer: fenced (another process took its
	// transactional ID) or unable to begin a transaction.
	Rejoins int64 `json:"rejoins"`
	// EndTime is the time spent ending the transactions that committed
	// (flushing their outputs, committing offsets, ending): ÷ Committed
	// is the mean.
	EndTime time.Duration `json:"end_time_ns"`
}
