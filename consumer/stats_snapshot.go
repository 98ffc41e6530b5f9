package consumer

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
)

// Stats returns a snapshot of the consumer's counters and of every owned
// partition. It is safe to call at any time, from any goroutine.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	out := Stats{
		ActiveSessions:     int(c.lanes.alive.Load()),
		WaitingForTurn:     c.turns.waiters(),
		Processed:          s.processed.Load(),
		Retries:            s.retries.Load(),
		DeadLetterFailures: s.dlqFailures.Load(),
		DeadLetterBlocked:  s.dlqBlocked.Load(),
		Truncations:        s.truncations.Load(),
		Filtered:           s.filtered.Load(),
		SkippedDone:        s.skippedDone.Load(),
		Panics:             s.panics.Load(),
		SlowHandlers:       s.slowHandlers.Load(),
		Rebalances:         s.rebalances.Load(),
		Stalls:             s.stalls.Load(),
		RevokeOverruns:     s.revokeOverruns.Load(),
		SilenceHolds:       int64(c.member.holds.Load()),
		Commits:            s.commits.Load(),
		CommitFailures:     s.commitFailures.Load(),
		Breaker:            breakerStats(c.brk, time.Now()),
		MovedReleased:      s.movedReleased.Load(),
		MovedParked:        s.movedParked.Load(),
		Growing:            c.growthStats(time.Now()),
	}
	if n := out.Commits + out.CommitFailures; n > 0 {
		out.CommitLatency = time.Duration(s.commitNanos.Load() / n)
	}
	s.dlqMu.Lock()
	out.DeadLettered = s.dlq
	out.DeadLetteredByReason = make(map[Reason]int64, len(s.dlqByWhy))
	for k, v := range s.dlqByWhy {
		out.DeadLetteredByReason[k] = v
	}
	s.dlqMu.Unlock()
	now := time.Now()
	out.WorkHeld = c.held.Read(now).On.String()
	out.Partitions = []PartitionStats{}
	for _, p := range c.own.all() {
		out.Partitions = append(out.Partitions, p.stats(now))
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	c.diagnose(&out)
	out.Control = c.controlStats()
	out.Transactions = c.txStats()
	out.Busy = c.busy.value()
	if c.cfg.MaxConcurrency > 0 {
		out.BusyRatio = out.Busy / float64(c.cfg.MaxConcurrency)
	}
	return out
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
