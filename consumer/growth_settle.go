package consumer

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The growth loop's rules over the member's knowledge (growth.go): when
// it has anything to do, which end offsets it needs, and when a change
// settles.

// active reports whether a change or a wait is on.
func (g *growth) active() bool {
	if g.holds.Len() > 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.topics {
		if t.hist.Changing() {
			return true
		}
	}
	return false
}

// endsWanted lists the topics whose end offsets a wait still needs, or
// whose change is due to settle (Grace passed) and not yet measured.
func (g *growth) endsWanted(now time.Time, grace time.Duration) []string {
	var out []string
	for t := range g.holds.Unmeasured() {
		out = append(out, t)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, t := range g.topics {
		if t.hist.Changing() && t.settle == nil && !now.Before(t.hist.Since.Add(grace)) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// measured takes in a listing of end offsets sent at asOf: the waits that
// began before it get their barriers, the changes due to settle their
// ends, and the topics' counts are learnt. A topic made again since asOf
// is left out: the listing may be of the old topic.
func (g *growth) measured(ends kadm.ListedOffsets, asOf time.Time, grace time.Duration) {
	for topic, parts := range ends {
		if g.madeAgainAfter(topic, asOf) {
			continue
		}
		for q, o := range parts {
			if o.Err == nil {
				g.holds.Measured(topic, q, o.Offset, asOf)
			}
		}
		g.learn(topic, nil, time.Time{}, len(parts), asOf)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
next:
	for topic, parts := range ends {
		t := g.topics[topic]
		if t == nil || !t.hist.Changing() || t.settle != nil || asOf.Before(t.hist.Since.Add(grace)) || asOf.Before(t.from) {
			continue
		}
		settle := map[int32]int64{}
		for q := range int32(t.hist.Newest()) { // every partition: a count no member saw may have placed older records on any
			o, ok := parts[q]
			if !ok || o.Err != nil {
				continue next // measured again at the next look
			}
			settle[q] = o.Offset
		}
		t.settle = settle
	}
}

// madeAgainAfter reports whether topic was found made again after at.
func (g *growth) madeAgainAfter(topic string, at time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.topics[topic]
	return t != nil && at.Before(t.from)
}

// settleDue lists the changing topics whose old partitions' floors for
// the newest count passed the ends measured after Grace, with no session
// parked on them with records placed by an older count.
func (g *growth) settleDue() []settling {
	g.mu.Lock()
	var due []string
	for name, t := range g.topics {
		if t.hist.Changing() && t.settle != nil {
			due = append(due, name)
		}
	}
	g.mu.Unlock()
	var out []settling
	for _, name := range due {
		g.mu.Lock()
		t := g.topics[name]
		settle, level := t.settle, t.hist.Newest()
		g.mu.Unlock()
		ok := true
		for q, end := range settle {
			if f, known := g.Floor(name, q, level); !known || f < end || g.parkedAny(name, q) {
				ok = false // records placed by older counts unhandled, or parked
				break
			}
		}
		if ok {
			out = append(out, settling{name, level})
		}
	}
	return out
}

// parkedAny reports whether (topic, q)'s last commit named sessions parked
// with records placed by an older count than the newest (or said none).
func (g *growth) parkedAny(topic string, q int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gc, ok := g.topics[topic].seen[q]
	return !ok || !gc.parked.none()
}
