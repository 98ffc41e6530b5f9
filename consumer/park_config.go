package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// ParkPolicy configures parking
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md): a session
// whose record keeps failing moves, with every later record of it, to a
// park topic, in order, so its partition keeps flowing for every other
// session; it is retried from there in its own lane and unparked once its
// parked records are done. The zero value is off.
type ParkPolicy struct {
	// Enabled turns parking on.
	Enabled bool
	// TopicSuffix names the park topic of each consumed topic: the topic
	// plus this suffix. Each park topic must exist with the same partition
	// count as its source topic, cleanup.policy=delete, and a retention
	// longer than the longest time a session may stay parked plus the
	// longest outage of the group. Default: [DefaultParkTopicSuffix].
	TopicSuffix string
	// AfterAttempts parks a record once this many attempts of it failed
	// in its lane. Default: [DefaultParkAfterAttempts].
	AfterAttempts int
	// After parks a record once it has been failing this long in its lane
	// (from its first failed attempt), whichever of After and
	// AfterAttempts comes first. Default: [DefaultParkAfter].
	//
	// The in-lane retry budget (Config.Retry: MaxAttempts, MaxElapsed)
	// never dead-letters a record while parking is on: when it ends before
	// After or AfterAttempts, the record is parked then. Parking is there
	// so that a session stuck for longer than its lane may wait keeps its
	// records and its order; dead-lettering them as retries-exhausted
	// because of a budget set for the in-lane retries would defeat it. A
	// Permanent (or Undecodable) error is dead-lettered at once, as
	// without parking (and SkipStalled still skips a stalled record).
	After time.Duration
	// Delay is how long a parked session waits before its first retry;
	// it doubles after each failed retry, up to MaxDelay. Defaults:
	// [DefaultParkDelay], [DefaultParkMaxDelay].
	Delay, MaxDelay time.Duration
	// MaxAttempts is the number of retries of a parked record from the
	// park topic; when they are spent it is dead-lettered (reason
	// park-exhausted) and OnExhausted decides the rest of its session.
	// Default: [DefaultParkMaxAttempts].
	MaxAttempts int
	// OnExhausted is what happens to a session whose parked record spent
	// its retries, after that record is dead-lettered: ParkHold (the
	// default) keeps the session parked and stops retrying it, ParkRelease
	// goes on with its next parked record.
	OnExhausted ParkExhausted
	// HealthAge makes Health report a partition whose oldest parked
	// record is older than this. Default: [DefaultParkHealthAge].
	HealthAge time.Duration
}

// ParkExhausted is what happens to a session whose parked record spent
// its retry budget (ParkPolicy.OnExhausted).
type ParkExhausted int

const (
	// ParkHold keeps the session parked, not retried: its later records
	// keep moving to the park topic until an operator releases it.
	ParkHold ParkExhausted = iota
	// ParkRelease goes on with the session's next parked record; the
	// session is unparked once none is left.
	ParkRelease
)

// Defaults of ParkPolicy, applied to its zero fields when Enabled.
const (
	DefaultParkTopicSuffix   = ".park"
	DefaultParkAfterAttempts = 3
	DefaultParkAfter         = 10 * time.Second
	DefaultParkDelay         = 5 * time.Second
	DefaultParkMaxDelay      = 5 * time.Minute
	DefaultParkMaxAttempts   = 10
	DefaultParkHealthAge     = 15 * time.Minute
)

func (p ParkPolicy) withDefaults() (ParkPolicy, error) {
	bad := func(field string, v any) (ParkPolicy, error) {
		return p, fmt.Errorf("%w: Park.%s: must not be negative, got %v", ErrConfig, field, v)
	}
	switch {
	case p.AfterAttempts < 0:
		return bad("AfterAttempts", p.AfterAttempts)
	case p.After < 0:
		return bad("After", p.After)
	case p.Delay < 0:
		return bad("Delay", p.Delay)
	case p.MaxDelay < 0:
		return bad("MaxDelay", p.MaxDelay)
	case p.MaxAttempts < 0:
		return bad("MaxAttempts", p.MaxAttempts)
	case p.HealthAge < 0:
		return bad("HealthAge", p.HealthAge)
	case p.OnExhausted != ParkHold && p.OnExhausted != ParkRelease:
		return p, fmt.Errorf("%w: Park.OnExhausted: unknown value %d", ErrConfig, p.OnExhausted)
	}
	orDefault(&p.TopicSuffix, DefaultParkTopicSuffix)
	orDefault(&p.AfterAttempts, DefaultParkAfterAttempts)
	orDefault(&p.After, DefaultParkAfter)
	orDefault(&p.Delay, DefaultParkDelay)
	orDefault(&p.MaxDelay, DefaultParkMaxDelay)
	orDefault(&p.MaxAttempts, DefaultParkMaxAttempts)
	orDefault(&p.HealthAge, DefaultParkHealthAge)
	if p.MaxDelay < p.Delay {
		return p, fmt.Errorf("%w: Park.MaxDelay: %v is below Park.Delay %v", ErrConfig, p.MaxDelay, p.Delay)
	}
	return p, nil
}

// rules is the part of the policy the parked set applies.
func (p ParkPolicy) rules() parkset.Rules {
	return parkset.Rules{Delay: p.Delay, MaxDelay: p.MaxDelay, MaxAttempts: p.MaxAttempts, Hold: p.OnExhausted == ParkHold}
}

// shouldPark reports whether a record that failed attempts times in its
// lane, the first failure at first, is to be parked now.
func (p ParkPolicy) shouldPark(err error, attempts int, first, now time.Time) bool {
	return IsPark(err) || attempts >= p.AfterAttempts || now.Sub(first) >= p.After
}

type parkError struct{ err error }

func (e *parkError) Error() string { return "park: " + e.err.Error() }
func (e *parkError) Unwrap() error { return e.err }

// Park wraps err so that, with Config.Park enabled, the record is parked at
// once (its session moves to the park topic,
// https://github.com/lanesdev/lanes/blob/main/docs/parking.md) instead of
// being retried in its lane. Without parking it is an ordinary error.
// Park(nil) returns nil.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parkError{err}
}

// IsPark reports whether err, or any error it wraps, was marked with Park.
func IsPark(err error) bool {
	var pe *parkError
	return errors.As(err, &pe)
}
