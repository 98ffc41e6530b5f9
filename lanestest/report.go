package lanestest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Report is a Ledger's verdict.
type Report struct {
	Sessions, Messages int
	// Calls is the number of handler calls recorded.
	Calls int
	// Violations: a first delivery of a session's message that started
	// before the session's previous message on its topic finished (seq n-1
	// when all are on one topic). lanes orders a session within a topic;
	// across topics, one consumer hands a session's records over one at a
	// time in the order they arrive (Overlaps still counts across topics).
	Violations int
	// Overlaps: a call that started while another call of the same session
	// was still running (lanes runs one message of a session at a time).
	Overlaps int
	// Regressions: a member handling a lower seq of a session after a
	// higher one on the same topic, within its own lifetime (a redelivery without a handover;
	// expected only where partitions are lost, such as a crash).
	Regressions int
	// Lost: acknowledged, but neither finished by a handler nor
	// dead-lettered.
	Lost int
	// Duplicates: successful handler calls beyond the first per message,
	// Redeliveries plus Resends.
	Duplicates int
	// Redeliveries: successful calls of a record (one partition and
	// offset) beyond its first: the consumer handed the same record again,
	// after a crash or a lost partition before its commit.
	Redeliveries int
	// Resends: successful calls of a message on a record other than the
	// one first handled, carrying the same event ID: the producer sent it
	// again (a retry after a timeout, say). Deduplication by event ID
	// (module dedup) is what removes these.
	Resends int
	// DeadLettered: acknowledged messages found in the dead-letter topic.
	DeadLettered int
	// Details lists the first few problems, for a test log.
	Details []string
}

func (r Report) String() string {
	return fmt.Sprintf("sessions %d, messages %d, calls %d: violations %d, overlaps %d, regressions %d, lost %d, duplicates %d (redelivered %d, re-sent %d), DLQ %d",
		r.Sessions, r.Messages, r.Calls, r.Violations, r.Overlaps, r.Regressions, r.Lost, r.Duplicates,
		r.Redeliveries, r.Resends, r.DeadLettered)
}

// Err returns nil when no guarantee was broken: no order violation, no
// overlapping calls and nothing lost (and no regression unless
// allowRegressions: where partitions are lost, redelivery is by design).
func (r Report) Err(allowRegressions bool) error {
	if r.Violations > 0 || r.Overlaps > 0 || r.Lost > 0 || (!allowRegressions && r.Regressions > 0) {
		return errors.New("lanes guarantee broken: " + r.String())
	}
	return nil
}

// recordAt is where a record is: its topic, partition and offset.
type recordAt struct {
	topic     string
	partition int32
	offset    int64
}

// Report checks every message of every session.
func (l *Ledger) Report() Report {
	calls, sent, dlq := l.snapshot()
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Start.Before(calls[j].Start) })
	r := Report{Messages: len(sent), Calls: len(calls)}
	note := func(format string, args ...any) {
		if len(r.Details) < 10 {
			r.Details = append(r.Details, fmt.Sprintf(format, args...))
		}
	}

	// Resolve every call to its message; calls of unknown place drop out.
	keys := make([]msgKey, len(calls))
	known := make([]bool, len(calls))
	sessions := map[string]bool{}
	for _, k := range sent {
		sessions[k.session] = true
	}
	finishAt := map[msgKey]time.Time{}   // earliest end of a final call
	oks := map[msgKey]map[recordAt]int{} // successful calls per record of the message
	topicOf := map[msgKey]string{}       // the topic of the message's first call that names one
	for i, c := range calls {
		k, ok := sent[c.EventID]
		if !ok {
			k, ok = msgKey{c.Session, c.Seq}, c.Seq >= 0
		}
		keys[i], known[i] = k, ok
		if !ok {
			continue
		}
		sessions[k.session] = true
		if _, seen := topicOf[k]; !seen && c.Topic != "" {
			topicOf[k] = c.Topic
		}
		if c.Final {
			if t, seen := finishAt[k]; !seen || c.End.Before(t) {
				finishAt[k] = c.End
			}
		}
		if c.OK {
			if oks[k] == nil {
				oks[k] = map[recordAt]int{}
			}
			oks[k][recordAt{c.Topic, c.Partition, c.Offset}]++
		}
	}
	r.Sessions = len(sessions)
	for _, recs := range oks {
		r.Resends += len(recs) - 1
		for _, n := range recs {
			r.Redeliveries += n - 1
		}
	}
	r.Duplicates = r.Redeliveries + r.Resends
	dead := map[msgKey]bool{}
	for id := range dlq {
		if k, ok := sent[id]; ok {
			dead[k] = true
			r.DeadLettered++
		}
	}

	type lastCall struct {
		Call
		seq int
	}
	running := map[string]lastCall{} // session → its call that ends last so far
	maxSeen := map[[3]string]int{}   // member, session, topic → highest seq handled
	prevOf := previous(sent, keys, known, topicOf)
	for i, c := range calls {
		if !known[i] {
			continue
		}
		k := keys[i]
		if o, ok := running[k.session]; ok && c.Start.Before(o.End) {
			r.Overlaps++
			note("%s seq %d started at %s (member %s) while another call of the session ran: seq %d on member %s, %s to %s",
				k.session, k.seq, c.Start.Format("15:04:05.000000"), c.Member,
				o.seq, o.Member, o.Start.Format("15:04:05.000000"), o.End.Format("15:04:05.000000"))
		}
		if o := running[k.session]; c.End.After(o.End) {
			running[k.session] = lastCall{c, k.seq}
		}

		mk := [3]string{c.Member, k.session, topicOf[k]}
		if m, ok := maxSeen[mk]; ok && k.seq < m {
			r.Regressions++
			note("member %s: %s seq %d after seq %d", c.Member, k.session, k.seq, m)
		}
		if m, ok := maxSeen[mk]; !ok || k.seq > m {
			maxSeen[mk] = k.seq
		}

		t, finished := finishAt[k]
		prev, hasPrev := prevOf(k)
		if !hasPrev || !finished || t.Before(c.Start) {
			continue // the first of its session on its topic, or not a first delivery
		}
		pt, ok := finishAt[prev]
		if (ok && !pt.After(c.Start)) || (!ok && dead[prev]) {
			continue // the previous one finished first, or was dead-lettered
		}
		r.Violations++
		note("%s seq %d started at %s (member %s) before seq %d finished", k.session, k.seq,
			c.Start.Format("15:04:05.000000"), c.Member, prev.seq)
	}

	for id, k := range sent {
		if _, ok := finishAt[k]; !ok {
			if _, ok := dlq[id]; !ok {
				r.Lost++
				note("lost: %s seq %d (%s)", k.session, k.seq, id)
			}
		}
	}
	return r
}

// previous returns the function that names the message a message waits
// for: the session's previous one on its topic, by seq, among those the
// ledger knows (acknowledged or handled: a seq never sent is no message).
// A message never handled (its topic unknown) counts as on every topic, so
// a lost message still holds up the next.
func previous(sent map[string]msgKey, keys []msgKey, known []bool, topicOf map[msgKey]string) func(msgKey) (msgKey, bool) {
	seqs := map[string][]int{} // session → its known seqs, ascending
	add := func(k msgKey) { seqs[k.session] = append(seqs[k.session], k.seq) }
	for _, k := range sent {
		add(k)
	}
	for i, k := range keys {
		if known[i] {
			add(k)
		}
	}
	for s, l := range seqs {
		slices.Sort(l)
		seqs[s] = slices.Compact(l)
	}
	memo := map[msgKey]msgKey{}
	return func(k msgKey) (msgKey, bool) {
		if p, ok := memo[k]; ok {
			return p, true
		}
		l := seqs[k.session]
		i, _ := slices.BinarySearch(l, k.seq)
		for t := topicOf[k]; i > 0; i-- {
			p := msgKey{k.session, l[i-1]}
			if pt := topicOf[p]; t == "" || pt == "" || pt == t {
				memo[k] = p
				return p, true
			}
		}
		return msgKey{}, false
	}
}
