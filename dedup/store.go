package dedup

import (
	"context"
	"time"
)

// State is what a claim found.
type State int

const (
	// Claimed: the caller now holds the claim, until ttl passes; it runs
	// the handler and then calls Done or Release.
	Claimed State = iota + 1
	// Done: the event was marked done; skip it.
	Done
	// Busy: another holder's claim has not expired.
	Busy
)

func (s State) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Done:
		return "done"
	case Busy:
		return "busy"
	}
	return "unknown"
}

// Store keeps, per (group, event ID), whether the event is claimed (by
// whom, until when) or done. Implementations must be safe for concurrent
// use, and Claim must be atomic: of concurrent claims on one key at most
// one gets Claimed. Package storetest checks a Store against this contract.
type Store interface {
	// Claim claims (group, id) for token until ttl passes, unless it is
	// done or claimed by another token that has not expired.
	Claim(ctx context.Context, group, id, token string, ttl time.Duration) (State, error)
	// Done marks (group, id) done, whoever holds the claim, for the
	// store's retention.
	Done(ctx context.Context, group, id string) error
	// Release drops the claim on (group, id) if token still holds it; a
	// done event, or another token's claim, is left as it is.
	Release(ctx context.Context, group, id, token string) error
}
