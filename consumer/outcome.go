package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// What a failed attempt leads to. The retry policy (RetryPolicy), the
// dead-letter topic and parking (ParkPolicy) decide it from the error and
// the record's tries so far, with no I/O: deliver.go acts on the verdict
// (waits and tries again, dead-letters, or hands the record to parking).
// The dead-letter reasons a verdict names are read from the error here
// (permanentReason, exhaustedReason).

// tries is one record's retry state across its attempts in its lane.
type tries struct {
	bo       backoff.BackOff // made on the first counted failure: most records need none
	spent    int             // failed attempts counted against the budget (not excused)
	failedAt time.Time       // the first counted failure, for parking
}

// step is what deliver does after an attempt.
type step uint8

const (
	stepDone  step = iota // it succeeded
	stepStale             // its partition was fenced or it was skipped as stalled meanwhile: no further attempt
	stepAgain             // a hold cut it or the breaker is open: attempt again, counting nothing
	stepRetry             // failed: wait, then attempt again
	stepDead              // failed for the last time: dead-letter it
	stepPark              // failed as ParkPolicy says: park it
)

// verdict is what an attempt leads to: its step, the wait before the next
// attempt (stepRetry), the dead-letter reason (stepDead), and whether its
// error is permanent.
type verdict struct {
	step   step
	wait   time.Duration
	reason Reason
	perm   bool
}

// next decides what a failed attempt that returned err leads to, at now,
// counting it in t. A record parks (when parking is on and err is not
// permanent) where it would be dead-lettered, or earlier as ParkPolicy
// says.
func (c *Consumer) next(t *tries, err error, now time.Time) verdict {
	t.spent++
	v := c.failed(err, t.spent, &t.bo)
	parkable := c.park != nil && !v.perm
	if parkable && t.failedAt.IsZero() {
		t.failedAt = now
	}
	if parkable && (v.reason != "" || c.cfg.Park.shouldPark(err, t.spent, t.failedAt, now)) {
		v.step = stepPark
	}
	return v
}

// failed decides what the spent-th counted failed attempt of a record,
// which returned err, leads to, parking aside: dead-lettered (stepDead,
// with its reason) when it is given up, else retried after a wait.
// *bo is the record's backoff, made here on its first failure.
func (c *Consumer) failed(err error, spent int, bo *backoff.BackOff) verdict {
	pol := c.cfg.Retry
	perm := permanentReason(err)
	v := verdict{step: stepRetry, perm: perm != ""}
	switch {
	case v.perm && c.cfg.DeadLetterTopic != "":
		v.reason = perm
	case !pol.Forever && spent >= pol.MaxAttempts:
		v.reason = exhaustedReason(err)
	}
	if *bo == nil {
		*bo = pol.backoff()
	}
	v.wait = (*bo).NextBackOff()
	if v.reason == "" && v.wait == backoff.Stop && !pol.Forever {
		v.reason = exhaustedReason(err)
	}
	if v.reason != "" {
		v.step = stepDead
	}
	return v
}

// permanentReason is the dead-letter reason of err when it is permanent
// (marked with Permanent or Undecodable: IsPermanent), else "".
func permanentReason(err error) Reason {
	var p *permanentError
	if errors.As(err, &p) {
		return p.reason
	}
	return ""
}

// exhaustedReason is the dead-letter reason of a record whose retry budget
// err spent: its last attempt timed out, or its retries ran out.
func exhaustedReason(err error) Reason {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	return ReasonRetriesExhausted
}
