package main

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
)

// checker is the demo's handler and its referee: it injects faults, and it
// checks every message of every session against what was sent.
type checker struct {
	cfg demoConfig
	per []int // messages per session
	// forcePoison lists "session|seq" that always fail permanently.
	forcePoison map[string]bool
	full        chan struct{}

	sent, sendErrs, retries atomic.Int64

	mu          sync.Mutex
	next        map[string]int    // session → next seq to finish
	dest        map[string]string // session → booked destination
	violations  int
	duplicates  int
	processed   int
	deadLetters int
	corrections int
	ackedIDs    map[string]bool
	doneIDs     map[string]bool
	latencies   []time.Duration
	closed      bool
}

func newChecker(cfg demoConfig) *checker {
	c := &checker{cfg: cfg, per: make([]int, cfg.sessions), full: make(chan struct{}),
		next: map[string]int{}, dest: map[string]string{},
		ackedIDs: make(map[string]bool, cfg.messages), doneIDs: make(map[string]bool, cfg.messages),
		latencies: make([]time.Duration, 0, cfg.messages)}
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
func (c *checker) acked(id string, err error) {
	if err != nil {
		c.sendErrs.Add(1)
		return
	}
	c.sent.Add(1)
	c.mu.Lock()
	c.ackedIDs[id] = true
	c.maybeFullLocked()
	c.mu.Unlock()
}

var errTransient = errors.New("injected: downstream busy")

// handle is the consumer's handler.
func (c *checker) handle(ctx context.Context, m *consumer.Message) error {
	seqText, text, _ := strings.Cut(string(m.Record.Value), "|")
	seq, _ := strconv.Atoi(seqText)
	c.mu.Lock()
	next := c.next[m.SessionID]
	switch {
	case seq < next:
		c.duplicates++ // redelivered after it finished: idempotent skip
		c.mu.Unlock()
		return nil
	case seq > next:
		c.violations++ // started before an earlier message finished
	}
	c.mu.Unlock()

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
	c.doneIDs[m.EventID] = true
	if dead {
		c.deadLetters++
		if strings.HasPrefix(text, "book a flight to ") {
			c.dest[m.SessionID] = "" // the booking failed: nothing to correct
		}
	} else {
		c.processed++
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
				c.violations++ // the correction ran before its booking
			}
			c.dest[m.SessionID] = "Paris"
		}
	}
	c.maybeFullLocked()
}

func (c *checker) maybeFullLocked() {
	if !c.closed && len(c.doneIDs) == c.cfg.messages && len(c.ackedIDs) == c.cfg.messages {
		c.closed = true
		close(c.full)
	}
}

// complete is closed once every message was acknowledged and finished.
func (c *checker) complete() <-chan struct{} { return c.full }
