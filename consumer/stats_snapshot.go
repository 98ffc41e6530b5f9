package consumer

import (
	"sort"
	"time"
)

// Stats returns a snapshot of the consumer's counters and of every owned
// partition. It is safe to call at any time, from any goroutine.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	out := Stats{
		ActiveSessions:     int(c.lanes.alive.Load()),
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
	return out
}
