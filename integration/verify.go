package integration

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Call is one handler invocation, as a test's handler reports it.
type Call struct {
	Member    string    `json:"m"` // the consumer instance (process or goroutine) that ran it
	Session   string    `json:"s"`
	Seq       int       `json:"q"`
	EventID   string    `json:"e"`
	Partition int32     `json:"p"`
	Offset    int64     `json:"o"`
	Attempt   int       `json:"a"`
	Start     time.Time `json:"t0"`
	End       time.Time `json:"t1"`
	// Final: the call ended the message (success, or Permanent: the
	// consumer dead-letters it next).
	Final bool `json:"f"`
	OK    bool `json:"ok"`
}

// Ledger accounts for every message of a scenario: what the producer got
// acknowledged, every handler call, and what the dead-letter topic holds.
// It is safe for concurrent use.
type Ledger struct {
	mu    sync.Mutex
	sent  map[string]sentMsg // event ID → message
	calls []Call
	dlq   map[string]string // event ID → lanes-dlq-reason
	sink  func(Call)        // when set, Handled passes calls here instead
}

type sentMsg struct {
	session string
	seq     int
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{sent: map[string]sentMsg{}, dlq: map[string]string{}}
}

// Sent records a message the broker acknowledged.
func (l *Ledger) Sent(session string, seq int, eventID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[eventID] = sentMsg{session, seq}
}

// Handled records one handler call.
func (l *Ledger) Handled(c Call) {
	if l.sink != nil {
		l.sink(c)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// DeadLettered records a record found in the dead-letter topic.
func (l *Ledger) DeadLettered(eventID, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dlq[eventID] = reason
}

// Finished counts distinct acknowledged messages that ended (handled or
// failed permanently) so far.
func (l *Ledger) Finished() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := map[string]bool{}
	for _, c := range l.calls {
		if c.Final {
			if _, ok := l.sent[c.EventID]; ok {
				done[c.EventID] = true
			}
		}
	}
	return len(done)
}

// Report is the verdict over a scenario.
type Report struct {
	Sessions, Messages int
	// Violations: a first delivery of seq n of a session that started
	// before seq n-1 finished.
	Violations int
	// Regressions: a member handling a lower seq of a session after a
	// higher one, within its own lifetime (redelivery without a handover).
	Regressions int
	// Lost: acknowledged, but neither handled nor dead-lettered.
	Lost int
	// Duplicates: successful handler calls beyond the first per message.
	Duplicates int
	// DeadLettered: acknowledged messages found in the dead-letter topic.
	DeadLettered int
	// Calls is the number of handler calls.
	Calls   int
	Details []string // the first few problems, for the test log
}

func (r Report) String() string {
	return fmt.Sprintf("sessions %d, messages %d, calls %d: violations %d, regressions %d, lost %d, duplicates %d, DLQ %d",
		r.Sessions, r.Messages, r.Calls, r.Violations, r.Regressions, r.Lost, r.Duplicates, r.DeadLettered)
}

// Report checks every message of every session.
func (l *Ledger) Report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	calls := append([]Call(nil), l.calls...)
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Start.Before(calls[j].Start) })
	r := Report{Messages: len(l.sent), Calls: len(calls)}
	note := func(format string, args ...any) {
		if len(r.Details) < 10 {
			r.Details = append(r.Details, fmt.Sprintf(format, args...))
		}
	}

	type key struct {
		session string
		seq     int
	}
	finishAt := map[key]time.Time{} // first end of a final call
	oks := map[key]int{}
	sessions := map[string]bool{}
	for _, c := range calls {
		sessions[c.Session] = true
		k := key{c.Session, c.Seq}
		if c.Final {
			if t, ok := finishAt[k]; !ok || c.End.Before(t) {
				finishAt[k] = c.End
			}
		}
		if c.OK {
			oks[k]++
		}
	}
	r.Sessions = len(sessions)
	for _, n := range oks {
		r.Duplicates += n - 1
	}

	dlqBySeq := map[key]bool{}
	for id := range l.dlq {
		if m, ok := l.sent[id]; ok {
			dlqBySeq[key{m.session, m.seq}] = true
			r.DeadLettered++
		}
	}
	for _, c := range calls {
		k := key{c.Session, c.Seq}
		first := !finishAt[k].Before(c.Start) // nothing finished this seq before it started
		if c.Seq == 0 || !first {
			continue
		}
		prev := key{c.Session, c.Seq - 1}
		t, ok := finishAt[prev]
		if ok && !t.After(c.Start) {
			continue
		}
		if !ok && dlqBySeq[prev] {
			continue // dead-lettered after its budget: no final call recorded
		}
		r.Violations++
		note("%s seq %d started at %s (member %s) before seq %d finished", c.Session, c.Seq,
			c.Start.Format("15:04:05.000000"), c.Member, c.Seq-1)
	}

	maxSeen := map[[2]string]int{}
	for _, c := range calls {
		mk := [2]string{c.Member, c.Session}
		if m, ok := maxSeen[mk]; ok && c.Seq < m {
			r.Regressions++
			note("member %s: %s seq %d after seq %d", c.Member, c.Session, c.Seq, m)
		}
		maxSeen[mk] = max(maxSeen[mk], c.Seq)
	}

	for id, m := range l.sent {
		k := key{m.session, m.seq}
		if _, ok := finishAt[k]; !ok && l.dlq[id] == "" {
			r.Lost++
			note("lost: %s seq %d (%s)", m.session, m.seq, id)
		}
	}
	return r
}
