package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onAssigned creates fresh state, with a new epoch, for each gained
// partition, and clears any pause left over from an earlier assignment.
func (c *Consumer) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	c.mu.Lock()
	for t, ps := range assigned {
		for _, id := range ps {
			c.epoch++
			k := partKey{t, id}
			c.parts[k] = newPartition(k, c.epoch)
		}
	}
	c.mu.Unlock()
	c.stats.rebalances.Add(1)
	c.flow.reset(cl, assigned)
	c.loadCommitted(ctx, cl, assigned)
}

// loadCommitted reads the group's committed offsets for newly assigned
// partitions: each starts its watermark (and Stats' Committed) there, and
// remembers the offsets its commit metadata lists as completed above it, so
// those records are skipped. Metadata that is not lanes', is corrupt, or was
// written for another offset than the one committed is ignored (with a
// warning): the worst case is reprocessing, never skipping unfinished work.
func (c *Consumer) loadCommitted(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if len(assigned) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	resps, err := kadm.NewClient(cl).FetchOffsets(cctx, c.cfg.Group)
	if err != nil {
		c.log().Warn().Err(err).Msg("assign: cannot read committed offsets; completed offsets will be reprocessed")
		return
	}
	for t, ps := range assigned {
		for _, id := range ps {
			r, ok := resps.Lookup(t, id)
			p := c.owned(partKey{t, id})
			if !ok || r.Err != nil || r.At < 0 || p == nil {
				continue
			}
			c.log().Debug().Str("topic", t).Int32("partition", id).Int64("committed", r.At).
				Int("metadata_bytes", len(r.Metadata)).Msg("assign: committed offset")
			rs, ok := c.completedAbove(t, id, r)
			p.mu.Lock()
			p.committed, p.tr.start = r.At, r.At
			if ok {
				p.skip, p.committedMeta = skipper{rs: rs}, r.Metadata
			}
			p.mu.Unlock()
		}
	}
}

// completedAbove decodes the completed offsets of a committed offset's
// metadata, reporting false (with a warning for anything but empty
// metadata) when they cannot be trusted or are turned off.
func (c *Consumer) completedAbove(t string, id int32, r kadm.OffsetResponse) ([]offRange, bool) {
	if c.cfg.DisableCompletedOffsets || r.Metadata == "" {
		return nil, false
	}
	wm, rs, err := decodeMetadata(r.Metadata)
	if err == nil && wm != r.At {
		err = fmt.Errorf("metadata written at offset %d, committed offset is %d", wm, r.At)
	}
	if err != nil {
		c.log().Warn().Err(err).Str("topic", t).Int32("partition", id).
			Msg("assign: ignoring commit metadata; completed offsets will be reprocessed")
		return nil, false
	}
	return rs, true
}

// onRevoked fences the revoked partitions, waits (at most RevokeTimeout) for
// their in-flight handlers, commits their watermarks, and drops their state.
// Only then does the rebalance go on, so the next owner starts exactly
// where this one stopped.
func (c *Consumer) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	parts := c.take(revoked)
	if len(parts) == 0 {
		return
	}
	if left := waitDrained(parts, c.cfg.RevokeTimeout); len(left) > 0 {
		for _, p := range left {
			c.log().Warn().Str("topic", p.key.topic).Int32("partition", p.key.partition).
				Dur("timeout", c.cfg.RevokeTimeout).Msg("revoke: handlers still running after RevokeTimeout; committing what is done")
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	if err := c.commit(cctx, parts); err != nil {
		c.log().Error().Err(err).Msg("revoke: final commit failed; the next owner may redeliver")
	}
	c.flow.reset(cl, revoked)
}

// onLost drops the lost partitions without committing: another member may
// own them already.
func (c *Consumer) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	c.log().Warn().Interface("partitions", lost).Msg("partitions lost: dropping them without a commit")
	c.take(lost)
	c.flow.reset(cl, lost)
}

// take fences the given partitions and removes them from the owned set.
func (c *Consumer) take(tps map[string][]int32) []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*partition
	for t, ps := range tps {
		for _, id := range ps {
			k := partKey{t, id}
			if p := c.parts[k]; p != nil {
				delete(c.parts, k)
				p.mu.Lock()
				p.fenceLocked()
				p.mu.Unlock()
				out = append(out, p)
			}
		}
	}
	return out
}

// takeAll fences and removes every owned partition.
func (c *Consumer) takeAll() []*partition {
	c.mu.Lock()
	tps := map[string][]int32{}
	for k := range c.parts {
		tps[k.topic] = append(tps[k.topic], k.partition)
	}
	c.mu.Unlock()
	return c.take(tps)
}

// waitDrained waits until every partition's in-flight work is over or the
// timeout passes, and returns the partitions still busy.
func waitDrained(parts []*partition, timeout time.Duration) []*partition {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for i, p := range parts {
		select {
		case <-p.drained:
		case <-t.C:
			var left []*partition
			for _, q := range parts[i:] {
				select {
				case <-q.drained:
				default:
					left = append(left, q)
				}
			}
			return left
		}
	}
	return nil
}

// ownedAll returns the partitions owned now.
func (c *Consumer) ownedAll() []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*partition, 0, len(c.parts))
	for _, p := range c.parts {
		out = append(out, p)
	}
	return out
}
