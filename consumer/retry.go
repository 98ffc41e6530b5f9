package consumer

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy says how a lane retries a message whose handler returned a
// non-permanent error. Later messages of the session wait behind it; other
// sessions do not. The zero value is the default policy: exponential
// backoff from 100ms, ×2 per attempt, capped at 10s, ±50% jitter, at most 10
// attempts and 2 minutes, then the dead-letter topic.
type RetryPolicy struct {
	// InitialInterval is the wait after the first failure. Default:
	// [DefaultRetryInitial].
	InitialInterval time.Duration
	// Multiplier grows the wait after each failure. Default: [DefaultRetryMultiplier].
	Multiplier float64
	// MaxInterval caps one wait. Default: [DefaultRetryMaxInterval].
	MaxInterval time.Duration
	// Jitter is the randomization factor: each wait is drawn from
	// [w·(1−Jitter), w·(1+Jitter)]. Must be at most 1; a negative Jitter
	// (say -1) turns jitter off. Default: [DefaultRetryJitter].
	Jitter float64
	// NoJitter turns jitter off.
	//
	// Deprecated: set Jitter to -1, which says the same in one field.
	// NoJitter still works, alone or with a negative Jitter; with a
	// positive Jitter, New refuses it as contradictory.
	NoJitter bool
	// MaxAttempts is the retry budget by count: handler calls including the
	// first. Default: [DefaultRetryMaxAttempts].
	MaxAttempts int
	// MaxElapsed is the retry budget by time, from the first attempt's
	// start; once spent, no further attempt starts. Default:
	// [DefaultRetryMaxElapsed].
	MaxElapsed time.Duration
	// Forever retries without budget (MaxAttempts and MaxElapsed are
	// ignored). Permanent errors are still dead-lettered when a
	// DeadLetterTopic is set; without one, they are retried too, with a
	// log line per message, so nothing is ever dropped.
	Forever bool
}

// Retry defaults.
const (
	DefaultRetryInitial     = 100 * time.Millisecond
	DefaultRetryMultiplier  = 2.0
	DefaultRetryMaxInterval = 10 * time.Second
	DefaultRetryJitter      = 0.5
	DefaultRetryMaxAttempts = 10
	DefaultRetryMaxElapsed  = 2 * time.Minute
)

func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	bad := func(field string, v any) (RetryPolicy, error) {
		return p, fmt.Errorf("%w: Retry.%s: out of range: %v", ErrConfig, field, v)
	}
	switch {
	case p.InitialInterval < 0:
		return bad("InitialInterval", p.InitialInterval)
	case p.MaxInterval < 0:
		return bad("MaxInterval", p.MaxInterval)
	case p.MaxElapsed < 0:
		return bad("MaxElapsed", p.MaxElapsed)
	case p.MaxAttempts < 0:
		return bad("MaxAttempts", p.MaxAttempts)
	case p.Multiplier < 0 || (p.Multiplier > 0 && p.Multiplier < 1):
		return bad("Multiplier (want >= 1)", p.Multiplier)
	case p.Jitter > 1:
		return bad("Jitter (want at most 1, or negative for none)", p.Jitter)
	case p.NoJitter && p.Jitter > 0:
		return p, fmt.Errorf("%w: Retry.NoJitter: contradicts Retry.Jitter %v: set only Jitter, -1 for none (NoJitter is deprecated)", ErrConfig, p.Jitter)
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = DefaultRetryInitial
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultRetryMultiplier
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = DefaultRetryMaxInterval
	}
	switch {
	case p.NoJitter || p.Jitter < 0:
		p.Jitter = -1 // none, and stays none if applied again
	case p.Jitter == 0:
		p.Jitter = DefaultRetryJitter
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultRetryMaxAttempts
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = DefaultRetryMaxElapsed
	}
	return p, nil
}

// backoff returns a fresh backoff for one message. It yields backoff.Stop
// when the budget by time is spent; the attempt budget is checked by the
// lane, which knows the attempt number.
func (p RetryPolicy) backoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.InitialInterval
	b.Multiplier = p.Multiplier
	b.MaxInterval = p.MaxInterval
	b.RandomizationFactor = max(p.Jitter, 0)
	b.MaxElapsedTime = p.MaxElapsed
	if p.Forever {
		b.MaxElapsedTime = 0
	}
	b.Reset()
	return b
}
