package consumer

import (
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// A topic deleted and made again under its name (an operator's delete and
// create, or a broker restarted without its data, as `lanes broker` is)
// comes back under a new topic ID. franz-go never adopts the new ID: the
// topic's fetches and commits fail with UNKNOWN_TOPIC_ID until it is purged
// from the client and added again. The topic watch finds the change (each
// check reads the topics' IDs; a fetch failing with UNKNOWN_TOPIC_ID runs a
// check at once) and re-subscribes the member to the new topic:
//
//   - the member's partitions of the old topic are fenced, their running
//     handlers get up to RevokeTimeout to return (then their contexts are
//     cancelled), and they are released without a commit: the old topic's
//     offsets mean nothing in the new one (committed by name, they would
//     skip its first records), and its records not handled yet went with
//     it;
//   - only then is the topic purged from the client and added back, so no
//     commit of the old topic is made after the client forgot it. The
//     group assigns the new topic's partitions as new ones: Kafka dropped
//     the old topic's commits with it, so they start where StartOffset
//     puts a partition without commits (StartEarliest, the default: at the
//     new topic's first record), each with fresh state;
//   - the topic's growth state starts afresh before that (growth.recreated):
//     the new topic's partition counts owe nothing to the old one's.
//
// A dead-letter topic made again is purged from the dead-letter client:
// its next write goes to the new topic. Park topics keep their own
// identity checks (the commit names the park topic's ID).

// topicID is a Kafka topic ID.
type topicID = [16]byte

// fmtTopicID writes a topic ID in hex, as franz-go's and the park code's
// lines do.
func fmtTopicID(id topicID) string { return hex.EncodeToString(id[:]) }

// recreation is a topic found made again, its re-subscription under way.
type recreation struct {
	from, to topicID
	since    time.Time
}

// leftID is the ID a topic was re-subscribed away from, and when.
type leftID struct {
	id topicID
	at time.Time
}

// idWatch follows the ID each consumed topic and the dead-letter topic is
// read (or written) under, and the topics found made again.
type idWatch struct {
	watched []string      // the consumed topics, then the dead-letter topic
	dlq     string        // the dead-letter topic, unless consumed too; "" without one
	kick    chan struct{} // cap 1: a fetch failed with UNKNOWN_TOPIC_ID; check now

	mu      sync.Mutex
	read    map[string]topicID    // the ID read under: the first a check saw, or the one re-subscribed to
	stale   map[string]topicID    // an ID a fetch failed under with UNKNOWN_TOPIC_ID since the last check
	left    map[string]leftID     // the ID last re-subscribed away from
	pending map[string]recreation // found made again; re-subscription under way
}

func newIDWatch(consumed []string, dlq string) *idWatch {
	w := slices.Clone(consumed)
	if slices.Contains(w, dlq) {
		dlq = "" // read as a consumed topic
	}
	if dlq != "" {
		w = append(w, dlq)
	}
	return &idWatch{watched: w, dlq: dlq, kick: make(chan struct{}, 1), read: map[string]topicID{},
		stale: map[string]topicID{}, left: map[string]leftID{}, pending: map[string]recreation{}}
}

// fetchFailed notes that a fetch of topic, under id, failed with
// UNKNOWN_TOPIC_ID, and asks for a check now. A failure under the ID the
// topic was just re-subscribed away from is left out for topicRecheck: a
// poll may still return fetches made before the purge.
func (w *idWatch) fetchFailed(topic string, id topicID, now time.Time) {
	if !slices.Contains(w.watched, topic) {
		return
	}
	w.mu.Lock()
	if l, ok := w.left[topic]; ok && l.id == id && now.Sub(l.at) < topicRecheck {
		w.mu.Unlock()
		return
	}
	if id != (topicID{}) {
		w.stale[topic] = id
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// compare takes a check's topic IDs and returns the watched topics found
// made again, sorted: the brokers name the topic under another ID than the
// one it is read under (the ID a fetch failed under, else the first one a
// check saw). It marks them pending, for readiness, until done.
func (w *idWatch) compare(ids map[string]topicID, now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, t := range w.watched {
		cur, ok := ids[t]
		if !ok {
			continue // missing (topics.go says so) or no IDs from these brokers
		}
		old := w.read[t]
		if st, ok := w.stale[t]; ok {
			delete(w.stale, t)
			if l, ok := w.left[t]; !ok || l.id != st || now.Sub(l.at) >= topicRecheck {
				old = st
			}
		}
		switch {
		case old == (topicID{}):
			w.read[t] = cur
		case old != cur:
			r, ok := w.pending[t]
			if !ok || r.to != cur {
				r = recreation{from: old, to: cur, since: now}
			}
			w.pending[t] = r
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// pendingOf returns topic's pending recreation.
func (w *idWatch) pendingOf(topic string) recreation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending[topic]
}

// done records that topic was re-subscribed: it is read under the new ID.
func (w *idWatch) done(topic string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.pending[topic]
	if !ok {
		return
	}
	w.read[topic] = r.to
	w.left[topic] = leftID{id: r.from, at: now}
	delete(w.pending, topic)
	if w.stale[topic] == r.from {
		delete(w.stale, topic) // a fetch made before the purge
	}
}

// reasons are the readiness reasons of topics found made again whose
// re-subscription is under way.
func (w *idWatch) reasons() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, t := range w.watched {
		r, ok := w.pending[t]
		if !ok {
			continue
		}
		what := fmt.Sprintf("topic %s was deleted and made again (its ID changed from %s to %s), found at %s: ",
			t, fmtTopicID(r.from), fmtTopicID(r.to), r.since.UTC().Format(time.RFC3339))
		if t == w.dlq {
			out = append(out, "dead-letter "+what+"moving the dead-letter writes to the new topic; if this stays, restart the consumer")
			continue
		}
		out = append(out, what+"re-subscribing to the new topic, dropping this member's partitions of the old one without a commit; if this stays, restart the consumer")
	}
	return out
}

// topicRecheck is how often the topics are checked while all exist (one
// may be deleted); while one is missing they are checked every
// CommitInterval, so its reason clears soon after it is created.
const topicRecheck = 30 * time.Second
