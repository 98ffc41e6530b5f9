package lanestest

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Call is one handler call, as a test's handler reports it.
type Call struct {
	Member  string `json:"m"` // the consumer instance (process or goroutine) that ran it
	Session string `json:"s"`
	// Seq is the message's place in its session. A call whose event ID was
	// recorded with Acked takes session and seq from there; a negative Seq
	// with an unknown event ID leaves the call out of the order checks.
	Seq     int    `json:"q"`
	EventID string `json:"e"`
	// Topic, Partition and Offset are the record's place. lanes orders a
	// session within a topic; Report checks order per session and topic.
	Topic     string    `json:"tp"`
	Partition int32     `json:"p"`
	Offset    int64     `json:"o"`
	Attempt   int       `json:"a"`
	Start     time.Time `json:"t0"`
	End       time.Time `json:"t1"`
	// Final: the call ended the message (success, or a permanent failure:
	// the consumer dead-letters it next).
	Final bool `json:"f"`
	OK    bool `json:"ok"`
}

// msgKey is a message's place: its session and its seq in the session.
type msgKey struct {
	session string
	seq     int
}

// Ledger accounts for every message of a test: what the producer got
// acknowledged (Acked), every handler call (RecordCall), and what the
// dead-letter topic holds (DeadLettered). Report checks them against each
// other. A Ledger is safe for concurrent use; the zero value is not, use
// NewLedger.
//
// A message is its session and seq, whatever its topic: a session sent to
// several topics numbers its messages in one sequence across them (see
// "Sessions that span topics" in the package documentation).
type Ledger struct {
	mu      sync.Mutex
	sent    map[string]msgKey // event ID → message
	calls   []Call
	dlq     map[string]string // event ID → lanes-dlq-reason
	final   map[string]bool   // event IDs with a final call
	done    map[string]bool   // sent event IDs with a final call or in the DLQ
	changed chan struct{}     // closed and replaced when done grows
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{sent: map[string]msgKey{}, dlq: map[string]string{}, final: map[string]bool{},
		done: map[string]bool{}, changed: make(chan struct{})}
}

// Acked records a message the broker acknowledged: seq is its place in its
// session (0, 1, 2, …), eventID the lanes event ID it carries.
func (l *Ledger) Acked(session string, seq int, eventID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[eventID] = msgKey{session, seq}
	l.settleLocked(eventID)
}

// RecordCall records one handler call.
func (l *Ledger) RecordCall(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if c.Final && c.EventID != "" {
		l.final[c.EventID] = true
		l.settleLocked(c.EventID)
	}
}

// DeadLettered records a record found in the dead-letter topic, by the
// event ID it carries and its lanes-dlq-reason header.
func (l *Ledger) DeadLettered(eventID, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dlq[eventID] = reason
	l.settleLocked(eventID)
}

// settleLocked marks id accounted for once it was sent and either ended in
// a final call or reached the dead-letter topic.
func (l *Ledger) settleLocked(id string) {
	if l.done[id] {
		return
	}
	if _, sent := l.sent[id]; !sent {
		return
	}
	if _, dead := l.dlq[id]; !l.final[id] && !dead {
		return
	}
	l.done[id] = true
	close(l.changed)
	l.changed = make(chan struct{})
}

// Accounted returns how many acknowledged messages are accounted for: they
// ended in a final handler call or are in the dead-letter topic.
func (l *Ledger) Accounted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

// AckedCount returns how many messages were recorded as acknowledged.
func (l *Ledger) AckedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// WaitAccounted blocks until at least n messages are accounted for, or ctx
// ends; then it returns an error that says how far it got.
func (l *Ledger) WaitAccounted(ctx context.Context, n int) error {
	for {
		l.mu.Lock()
		got, changed := len(l.done), l.changed
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("lanestest: %d of %d messages accounted for: %w", got, n, ctx.Err())
		}
	}
}

// snapshot copies what Report needs under the lock.
func (l *Ledger) snapshot() (calls []Call, sent map[string]msgKey, dlq map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent = make(map[string]msgKey, len(l.sent))
	for id, k := range l.sent {
		sent[id] = k
	}
	dlq = make(map[string]string, len(l.dlq))
	for id, r := range l.dlq {
		dlq[id] = r
	}
	return append([]Call(nil), l.calls...), sent, dlq
}

// Calls returns a copy of every handler call recorded so far, in the order
// they were recorded (their Start and End say when each ran): what a
// scenario measures beyond Report, such as a session's rate.
func (l *Ledger) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}
