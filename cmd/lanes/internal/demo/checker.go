package demo

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// checker is the demo's handler and its referee: it injects faults, applies
// each conversation (idempotently: a redelivered message is skipped), and
// records every send and handler call in a lanestest ledger, which checks
// every message of every session for order and loss.
type checker struct {
	cfg    demoConfig
	per    []int // messages per session
	ledger *lanestest.Ledger
	// forcePoison lists "session|seq" that always fail permanently.
	forcePoison map[string]bool
	// dedup: a dedup store skips redeliveries, not the handler itself.
	dedup bool

	sent, sendErrs, retries atomic.Int64

	mu          sync.Mutex
	next        map[string]int    // session → next seq to apply
	dest        map[string]string // session → booked destination
	misordered  int               // a correction applied before its booking
	processed   int
	deadLetters int             // distinct messages given up to the DLQ
	deadIDs     map[string]bool // their event IDs: a message handled again after a crash (its copy unwritten) is given up again
	corrections int
	latencies   []time.Duration
	effects     map[string]int // event ID → times its effect was applied
}

func newChecker(cfg demoConfig) *checker {
	c := &checker{cfg: cfg, per: make([]int, cfg.sessions), ledger: lanestest.NewLedger(),
		next: map[string]int{}, dest: map[string]string{}, effects: map[string]int{}, deadIDs: map[string]bool{}, latencies: make([]time.Duration, 0, cfg.messages)}
	for i := range c.per {
		c.per[i] = cfg.messages / cfg.sessions
		if i < cfg.messages%cfg.sessions {
			c.per[i]++
		}
	}
	return c
}

func (c *checker) perSession(i int) int { return c.per[i] }

// acked records the broker's answer for one sent message.
func (c *checker) acked(session string, seq int, id string, err error) {
	if err != nil {
		c.sendErrs.Add(1)
		return
	}
	c.sent.Add(1)
	c.ledger.Acked(session, seq, id)
}

// handler is the consumer's handler, every call recorded in the ledger.
func (c *checker) handler() consumer.Handler {
	return c.ledger.Handler("demo", consumer.HandlerFunc(c.handle))
}

var errTransient = errors.New("injected: downstream busy")

func (c *checker) handle(ctx context.Context, m *consumer.Message) error {
	seqText, text, _ := strings.Cut(string(m.Record.Value), "|")
	seq, _ := strconv.Atoi(seqText)
	c.mu.Lock()
	done := seq < c.next[m.SessionID] && !c.dedup
	c.mu.Unlock()
	if done {
		return nil // redelivered after it was applied: idempotent skip
	}
	if c.cfg.work > 0 {
		select {
		case <-time.After(c.cfg.work):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.poisoned(m.EventID) || c.forcePoison[m.SessionID+"|"+seqText] {
		c.finish(m, seq, text, true)
		return consumer.Permanent(errors.New("injected: cannot parse request"))
	}
	if rand.Float64() < c.cfg.transient {
		c.retries.Add(1)
		return errTransient
	}
	c.finish(m, seq, text, false)
	return nil
}

// poisoned decides, from the event ID alone, whether a message is a poison
// pill, so that every attempt of it agrees.
func (c *checker) poisoned(id string) bool {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return float64(h.Sum64()%1_000_000) < c.cfg.permanent*1_000_000
}

func (c *checker) finish(m *consumer.Message, seq int, text string, dead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next[m.SessionID] = seq + 1
	if dead {
		if !c.deadIDs[m.EventID] {
			c.deadIDs[m.EventID] = true
			c.deadLetters++
		}
		if strings.HasPrefix(text, "book a flight to ") {
			c.dest[m.SessionID] = "" // the booking failed: nothing to correct
		}
		return
	}
	c.processed++
	c.effects[m.EventID]++
	c.latencies = append(c.latencies, time.Since(m.Record.Timestamp))
	switch {
	case strings.HasPrefix(text, "book a flight to "):
		c.dest[m.SessionID] = strings.TrimPrefix(text, "book a flight to ")
	case text == "make it Paris":
		switch c.dest[m.SessionID] {
		case "London":
			c.corrections++
		case "": // its booking was dead-lettered
		default:
			c.misordered++ // the correction ran before its booking
		}
		c.dest[m.SessionID] = "Paris"
	}
}

// complete returns a channel closed once every message was acknowledged
// and accounted for (handled or failed permanently), or never if ctx ends
// first.
func (c *checker) complete(ctx context.Context) <-chan struct{} {
	full := make(chan struct{})
	go func() {
		if c.ledger.WaitAccounted(ctx, c.cfg.messages) == nil {
			close(full)
		}
	}()
	return full
}

// duplicateEffects counts effects applied beyond the first per event.
func (c *checker) duplicateEffects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.effects {
		n += k - 1
	}
	return n
}
