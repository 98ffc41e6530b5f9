package consumer

import (
	"sync"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/control"

	"github.com/lanesdev/lanes/consumer/internal/breaker"
	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kgo"
)

// work is one record on its way through a lane.
type work struct {
	rec     *kgo.Record
	p       *partition
	seq     uint64
	session string
	lane    string
	msg     Message    // handed to the handler; part of work to save an allocation
	first   attemptCtx // the first attempt's context, likewise
	// placed is the record's placement stamp (zero: none); moves says it
	// was read during a change of its topic's partition count, so its
	// session may have to wait for its old partition (growth_loop.go).
	placed hashring.Placement
	moves  bool
	// movedBack says it was given back to its lane while it waits as
	// moved (Consumer.giveBack): its partition excuses it from the stall
	// watch (movedWaiting) until its lane takes it again (Consumer.retaken).
	movedBack bool
	// parkRetry marks a retry of the lane's parked head (park_retry.go),
	// queued by the park loop; rec is nil then.
	parkRetry bool
	// resource is what Throttle.Resource named ("": none); ticket is what
	// the record was admitted through by the control gate so far
	// (control.go), both read and written under its shard's lock.
	resource string
	ticket   control.Ticket

	// claim is held by whoever finishes the record, its lane or the stall
	// skipper, while deciding and writing its outcome: one outcome, one
	// dead-letter copy.
	claim sync.Mutex
}

// probeRec is the running probe as the gate knows it: the record it runs
// on (a batch's head) and when it started, to name it if it hangs.
type probeRec struct {
	id    breaker.ProbeID
	w     *work
	start time.Time
}
