package consumer

import (
	"errors"
	"time"
)

// The silence hold. A member whose group coordinator takes no heartbeat
// is counted gone by the group once the session timeout passes, measured
// from the last heartbeat the coordinator received; its partitions then go
// to other members, which start their sessions at once. The member itself
// learns it only when the coordinator answers again: until then it would
// go on handling records that another member is handling too. So a member
// holds its work before that can happen: once no heartbeat sent in the
// last four fifths of the session timeout has been taken (answered with
// no error; holdAfter), it cancels the contexts of the attempts running
// and starts none, in every lane, until the session is seen going on (a
// second heartbeat taken in a session: the first answer may be the one
// that fences the member, and franz-go ends the session before it sends
// another; or the assignment after a classic sync taken) or it ends
// (partitions lost: they are released as usual). A hold can begin, and
// lasts, while the member rebalances (it keeps the partitions not
// revoked) and during the shutdown's drain. The records stay where they
// are; an attempt cut by the hold, or failing while it
// holds, is not counted against its retry budget nor by the breaker. A
// handler that honours its context therefore never runs when another
// member may own its partition.

// errGroupSilent marks the error of an attempt cut by a silence hold.
var errGroupSilent = errors.New("consumer: work held: the group coordinator takes no heartbeat")

// holdAfter is the silence, counted from the sending of the last heartbeat
// answered, after which a member holds its work: four fifths of the
// session timeout, leaving the rest for cancelled handlers to return
// before the coordinator can count the member gone.
func holdAfter(sessionTimeout time.Duration) time.Duration {
	return sessionTimeout - sessionTimeout/5
}

// holdGate is one silence hold: since when, and a channel closed when it
// ends.
type holdGate struct {
	since time.Time
	over  chan struct{}
	// Guarded by membership.mu: heartbeats answered in a session since it
	// began, and whether a classic sync was answered since.
	answers int
	synced  bool
}
