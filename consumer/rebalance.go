package consumer

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onAssigned creates fresh state, with a new epoch, for each gained
// partition, clears any pause left over from an earlier assignment, and
// sets where each starts.
func (c *Consumer) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	parts := c.own.assign(assigned, c.cfg.MaxBufferedRecords, c.flow.mark)
	c.stats.rebalances.Add(1)
	c.flow.reset(cl, assigned)
	c.loadCommitted(ctx, cl, parts)
}

// loadCommitted reads the group's committed offsets for newly assigned
// partitions: each starts its watermark (and Stats' Committed) there, and
// remembers the offsets its commit metadata lists as completed above it, so
// those records are skipped. Metadata that is not lanes', is corrupt, or was
// written for another offset than the one committed is ignored (with a
// warning): the worst case is reprocessing, never skipping unfinished work.
// A partition without a commit starts where the reset policy puts it, and
// that position is committed (startPositions).
func (c *Consumer) loadCommitted(ctx context.Context, cl *kgo.Client, parts []*partition) {
	if len(parts) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	resps, err := adm.FetchOffsets(cctx, c.cfg.Group)
	if err != nil {
		c.log().Warn().Err(err).Msg("assign: cannot read committed offsets; completed offsets will be reprocessed")
		return
	}
	var fresh []*partition
	for _, p := range parts {
		t, id := p.key.topic, p.key.partition
		r, ok := resps.Lookup(t, id)
		switch {
		case ok && r.Err != nil:
			c.log().Warn().Err(r.Err).Str("topic", t).Int32("partition", id).
				Msg("assign: cannot read the committed offset; its position is committed once records arrive")
			continue
		case !ok || r.At < 0:
			fresh = append(fresh, p)
			continue
		}
		c.log().Debug().Str("topic", t).Int32("partition", id).Int64("committed", r.At).
			Int("metadata_bytes", len(r.Metadata)).Msg("assign: committed offset")
		if rs, ok := c.completedAbove(t, id, r); ok {
			p.resume(r.At, rs, r.Metadata)
		} else {
			p.resume(r.At, nil, "")
		}
	}
	c.startPositions(cctx, adm, fresh)
}

// startPositions lists, for partitions the group has no commit for, the
// offset the reset policy starts them at. This runs before the client
// lists it for fetching, so it is never above the first record fetched.
func (c *Consumer) startPositions(ctx context.Context, adm *kadm.Client, parts []*partition) {
	if len(parts) == 0 {
		return
	}
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.key.topic) {
			topics = append(topics, p.key.topic)
		}
	}
	list := adm.ListStartOffsets
	if c.cfg.StartOffset == StartLatest {
		list = adm.ListEndOffsets
	}
	offs, err := list(ctx, topics...)
	if err != nil {
		c.log().Warn().Err(err).Msg("assign: cannot list start positions; they are committed once records arrive")
		return
	}
	for _, p := range parts {
		if o, ok := offs.Lookup(p.key.topic, p.key.partition); ok && o.Err == nil {
			p.startAt(o.Offset)
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

// onRevoked fences the revoked partitions, waits (at most RevokeTimeout)
// for their running handlers, commits their watermarks and releases them.
// Only then does the rebalance go on, so the next owner starts exactly
// where this one stopped. A shutdown draining meanwhile keeps its
// partitions owned, so a revoke finds them and waits for the same drain.
func (c *Consumer) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	parts := c.own.lookup(revoked)
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		p.stopStarting()
	}
	for _, p := range waitDrained(ctx, parts, c.cfg.RevokeTimeout) {
		c.log().Warn().Str("topic", p.key.topic).Int32("partition", p.key.partition).
			Dur("timeout", c.cfg.RevokeTimeout).Msg("revoke: handlers still running after RevokeTimeout; committing what is done")
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	if err := c.commit(cctx, parts); err != nil {
		c.log().Error().Err(err).Msg("revoke: final commit failed; the next owner may redeliver")
	}
	c.own.release(parts)
	c.flow.reset(cl, revoked)
}

// onLost releases the lost partitions without committing: another member
// may own them already.
func (c *Consumer) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	if names := partitionNames(lost); len(names) > 0 {
		c.log().Warn().Strs("partitions", names).Str("group", c.cfg.Group).
			Msg("partitions lost: dropping them without a commit; records since their last commit are redelivered")
	}
	c.own.release(c.own.lookup(lost))
	c.flow.reset(cl, lost)
}

// partitionNames returns the partitions of ps as sorted "topic/partition"
// strings.
func partitionNames(ps map[string][]int32) []string {
	var out []string
	for t, ids := range ps {
		for _, id := range ids {
			out = append(out, fmt.Sprintf("%s/%d", t, id))
		}
	}
	slices.Sort(out)
	return out
}
