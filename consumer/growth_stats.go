package consumer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
)

// GrowthStats is a consumed topic whose partition count changed, while
// its change is not settled
// (https://github.com/lanesdev/lanes/blob/main/docs/operations.md#adding-partitions-to-a-live-topic).
type GrowthStats struct {
	Topic string `json:"topic"`
	// Counts are the partition counts whose records may still be
	// unhandled, oldest first; the last is the topic's count now.
	Counts []int `json:"counts"`
	// Since is when the member first knew of the newest count.
	Since time.Time `json:"since"`
	// Waiting counts the sessions of this member's partitions waiting on
	// their new partition for the group to handle their records on their
	// old ones; OldestWait is the longest such wait, of OldestSession on
	// OldestPartition.
	Waiting         int           `json:"waiting"`
	OldestWait      time.Duration `json:"oldest_wait"`
	OldestSession   string        `json:"oldest_session"`
	OldestPartition int32         `json:"oldest_partition"`
	// OldestWaitsFor are the old partitions that wait is for.
	OldestWaitsFor []int32 `json:"oldest_waits_for"`
}

// growthStats lists the topics changing, and the waits, at now.
func (c *Consumer) growthStats(now time.Time) []GrowthStats {
	out := []GrowthStats{}
	waits := c.grow.holds.Snapshot()
	c.grow.mu.Lock()
	for name, t := range c.grow.topics {
		if !t.hist.Changing() && !slices.ContainsFunc(waits, func(w regrow.Wait) bool { return w.At.Topic == name }) {
			continue
		}
		out = append(out, GrowthStats{Topic: name, Counts: slices.Clone(t.hist.Counts), Since: t.hist.Since, OldestWaitsFor: []int32{}})
	}
	c.grow.mu.Unlock()
	for i := range out {
		g := &out[i]
		for _, w := range waits { // oldest first
			if w.At.Topic != g.Topic {
				continue
			}
			if g.Waiting++; g.Waiting == 1 {
				g.OldestWait, g.OldestSession, g.OldestPartition = now.Sub(w.Since), w.Session, w.At.Partition
				for _, b := range w.Old {
					g.OldestWaitsFor = append(g.OldestWaitsFor, b.Partition)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b GrowthStats) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// growthReasons are Health's lines for moved sessions waiting longer than
// Growth.HealthAge.
func growthReasons(gs []GrowthStats, age time.Duration) []string {
	var out []string
	for _, g := range gs {
		if g.Waiting == 0 || g.OldestWait < age {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d sessions moved by the topic's growth (partition counts %v) wait for their old partitions; "+
			"session %q on partition %d has waited %v for partitions %v: their records from before it are not handled yet, "+
			"or those partitions' owners do not report them (are they consumed, by lanes members of this version?)",
			g.Topic, g.Waiting, g.Counts, g.OldestSession, g.OldestPartition, g.OldestWait.Round(time.Second), g.OldestWaitsFor))
	}
	return out
}

// MarshalJSON writes g with OldestWait as a duration string.
func (g GrowthStats) MarshalJSON() ([]byte, error) {
	type plain GrowthStats
	return json.Marshal(struct {
		plain
		OldestWait string `json:"oldest_wait"`
	}{plain(g), g.OldestWait.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (g *GrowthStats) UnmarshalJSON(b []byte) error {
	type plain GrowthStats
	v := struct {
		*plain
		OldestWait string `json:"oldest_wait"`
	}{plain: (*plain)(g)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return setDuration(&g.OldestWait, "oldest_wait", v.OldestWait)
}
