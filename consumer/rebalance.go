package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
)

// onAssigned creates fresh state, with a new epoch, for each gained
// partition, clears any pause left over from an earlier assignment, and
// sets where each starts. Partitions assigned during a shutdown start
// fenced (nothing of them is handled), and so do those whose take-up the
// shutdown overtakes; their start is still read, within the shutdown's
// bound, so that its final commit hands a fresh partition's start position
// on (StartLatest: the end now) and keeps a park position it found. The
// parked sets' rebuild serves only handling: it ends when the shutdown
// begins.
func (c *Consumer) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	c.takeUps.begin()
	defer c.takeUps.end()
	parts := c.own.assign(assigned, c.cfg.MaxBufferedRecords, c.flow.mark)
	c.growAssigned(parts, nil)
	c.stats.rebalances.Add(1)
	c.flow.reset(cl, assigned)
	_, gen := cl.GroupMetadata()
	c.enablePark(parts, gen, c.member.protocol())
	c.logAssigned(assigned, gen, c.stop.began.Load() != 0)
	ctx, end := c.untilFinal(ctx) // a shutdown, before or meanwhile, bounds the reads
	defer end()
	c.loadCommitted(ctx, cl, parts)
	ctx, cancel := c.stop.untilShutdown(ctx)
	defer cancel()
	c.rebuildParks(ctx, cl, parts)
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
	resps, err := adm.FetchOffsets(cctx, c.cfg.Group) // every partition's: growth history and backlogs are learnt from the others too
	if err != nil {
		c.log().Warn().Err(err).Msg("assign: cannot read committed offsets; completed offsets will be reprocessed (with parking, the partitions are held until their rebuild reads them; with transactions, until a rewind reads them)")
		parkUnread(parts)
		if c.tx != nil {
			c.tx.unread(parts, err)
		}
		return
	}
	c.settled(ctx, cl, parts, resps) // its own CommitTimeout: the reads below keep theirs
	c.growAssigned(nil, resps)
	c.observeCounts(cctx, adm, parts)
	var fresh, kept []*partition
	for _, p := range parts {
		t, id := p.key.topic, p.key.partition
		r, ok := resps.Lookup(t, id)
		switch {
		case ok && r.Err != nil:
			c.log().Warn().Err(r.Err).Str("topic", t).Int32("partition", id).
				Msg("assign: cannot read the committed offset; its position is committed once records arrive (with parking, once its rebuild reads it)")
			parkUnread([]*partition{p})
			if c.tx != nil {
				c.tx.unread([]*partition{p}, r.Err)
			}
			continue
		case !ok || r.At < 0:
			p.parkCommitted("") // read: none
			fresh = append(fresh, p)
			continue
		}
		if p.parkCommitted(r.Metadata) {
			kept = append(kept, p)
		}
		c.log().Debug().Str("topic", t).Int32("partition", id).Int64("committed", r.At).
			Int("metadata_bytes", len(r.Metadata)).Msg("assign: committed offset")
		p.growCommitted(r.Metadata)
		if rs, ok := c.completedAbove(t, id, r); ok {
			p.resume(r.At, rs, r.Metadata)
		} else {
			p.resume(r.At, nil, "")
		}
	}
	c.startPositions(cctx, adm, fresh)
	if _, stopping := c.stop.beganAt(); !stopping {
		c.learnBacklog(ctx, adm, parts, resps) // after the start positions: bounded on its own
	}
	c.warnParkOff(ctx, cl, kept, "assign") // after the start positions, bounded on its own: it only logs
}

// settled puts into resps the committed offsets of parts read as settled
// (fetchStable), in place of those read with the group's others. When
// they do not settle within CommitTimeout (a transaction that committed one of them
// not ended: its member killed before its end, until the transaction
// times out), those are kept, with a warning: the offsets before that
// transaction, right when it aborts, as it does once timed out.
func (c *Consumer) settled(ctx context.Context, cl *kgo.Client, parts []*partition, resps kadm.OffsetResponses) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	stable, err := fetchStable(ctx, cl, c.cfg.Group, parts)
	if err != nil {
		c.log().Warn().Err(err).Str("group", c.cfg.Group).
			Msg("assign: committed offsets not settled in time (a transaction that committed one has not ended); starting from those before it, its inputs are handled again if it commits")
		return
	}
	stable.Each(func(r kadm.OffsetResponse) {
		if r.Err == nil || r.At >= 0 {
			resps.Add(r)
		}
	})
}

// fetchStable reads group's committed offsets of parts as settled
// (KIP-447's require_stable): while a transaction that committed an
// offset of one of them has not ended, the broker answers
// UNSTABLE_OFFSET_COMMIT for it, and parts are asked again (50 ms,
// doubling to 1 s) until it ends or ctx does. Read unsettled (or with
// the group's other offsets: a broker checks the partitions asked for),
// the offset is the one before that transaction: when it then commits
// (its member was not told so, and rewound: its coordinator killed), what
// it consumed is handled again from there, and its outputs read twice
// (TestClusterLeaderKilledExactlyOnce: 4,775 inputs; TestTransactionsStableRewind).
func fetchStable(ctx context.Context, cl *kgo.Client, group string, parts []*partition) (kadm.OffsetResponses, error) {
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	at := map[string]int{}
	for _, p := range parts {
		i, ok := at[p.key.topic]
		if !ok {
			i, at[p.key.topic] = len(g.Topics), len(g.Topics)
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic = p.key.topic
			g.Topics = append(g.Topics, rt)
		}
		g.Topics[i].Partitions = append(g.Topics[i].Partitions, p.key.partition)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable, req.Groups = true, []kmsg.OffsetFetchRequestGroup{g}
	wait := 50 * time.Millisecond
	for {
		resps, err := offsetsOf(req.RequestWith(ctx, cl))
		unsettled := errors.Is(err, kerr.UnstableOffsetCommit)
		resps.Each(func(r kadm.OffsetResponse) { unsettled = unsettled || errors.Is(r.Err, kerr.UnstableOffsetCommit) })
		if !unsettled {
			return resps, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("group %s: a transaction's offset commit is still pending: %w", group, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// offsetsOf is an OffsetFetch's answer for its one group, as kadm gives
// it; err is the request's, or the group's.
func offsetsOf(resp *kmsg.OffsetFetchResponse, err error) (kadm.OffsetResponses, error) {
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("offset fetch: %d groups answered, want 1", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, err
	}
	out := kadm.OffsetResponses{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			var meta string
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			out.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: t.Topic, Partition: p.Partition, At: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta},
				Err: kerr.ErrorForCode(p.ErrorCode)})
		}
	}
	return out, nil
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
	if added := c.newPartitions(parts); len(added) > 0 && c.cfg.StartOffset == StartLatest {
		if starts, err := adm.ListStartOffsets(ctx, topics...); err == nil {
			c.readFromStart(added, starts)
			for _, p := range added {
				if o, ok := starts.Lookup(p.key.topic, p.key.partition); ok && o.Err == nil {
					offs[p.key.topic][p.key.partition] = o // added since the group last committed: read from its start
				}
			}
			c.log().Info().Str("partitions", partitionList(added)).
				Msg("assign: partitions added to the topic since the group's commits are read from their start (StartLatest applies to partitions the group had)")
		} else {
			c.log().Warn().Err(err).Str("partitions", partitionList(added)).
				Msg("assign: cannot list the start of partitions added since the group's commits; they start at their end, and what was produced to them before is not handled")
		}
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
func (c *Consumer) completedAbove(t string, id int32, r kadm.OffsetResponse) ([]offsets.Range, bool) {
	r.Metadata, _, _ = splitParkMeta(r.Metadata)
	if c.cfg.DisableCompletedOffsets || r.Metadata == "" {
		return nil, false
	}
	wm, rs, err := offsets.DecodeMetadata(r.Metadata)
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

// onRevoked fences the revoked partitions, waits for their running
// handlers (drainRevoked), commits their watermarks and releases them. Only
// then does the rebalance go on, so the next owner starts exactly where
// this one stopped, and never while a handler that honours its context
// still runs here. A shutdown draining meanwhile keeps its partitions
// owned, so a revoke finds them and waits for the same drain; its commit
// then keeps the shutdown's deadline.
func (c *Consumer) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if c.tx != nil && len(revoked) > 0 {
		c.tx.rebalanced() // franz-go aborts the open transaction: its end must come, at once
	}
	if parts := c.own.lookup(revoked); len(parts) > 0 {
		c.logRevoked(parts)
		c.revoke(ctx, parts)
		c.growForget(parts)
		c.flow.reset(cl, revoked)
	}
}

// revoke drains parts (drainRevoked), commits and releases them.
func (c *Consumer) revoke(ctx context.Context, parts []*partition) {
	c.drainRevoked(ctx, parts)
	if c.tx != nil { // the open transaction aborts (franz-go's session): the next owner handles what it held
		c.own.release(parts)
		return
	}
	cctx, cancel := context.WithDeadline(ctx, c.finalDeadline(time.Now()))
	defer cancel()
	if err := c.commit(cctx, parts); err != nil {
		c.log().Error().Err(err).Str("partitions", partitionList(parts)).
			Msg("revoke: final commit failed; the next owner redelivers what this member finished since its last commit")
	}
	c.own.release(parts)
}

// drainRevoked fences parts and waits for their running handlers: up to
// RevokeTimeout less a grace period (revokeGrace), then cancels the
// contexts of the attempts still running and gives them the grace period
// to return. A handler still running after that ignores its context: it is
// logged and counted (Stats.RevokeOverruns), and may overlap the next
// owner's first delivery of its session.
func (c *Consumer) drainRevoked(ctx context.Context, parts []*partition) {
	for _, p := range parts {
		p.stopStarting()
	}
	grace := revokeGrace(c.cfg.RevokeTimeout)
	busy := waitDrained(ctx, parts, c.cfg.RevokeTimeout-grace)
	for _, p := range busy {
		p.cancelAttempts()
	}
	for _, p := range waitDrained(ctx, busy, grace) {
		c.stats.revokeOverruns.Add(1)
		c.log().Warn().Str("topic", p.key.topic).Int32("partition", p.key.partition).
			Stringer("revoke_timeout", c.cfg.RevokeTimeout).
			Msg("revoke: a handler ignored its cancelled context and still runs as the partition is given up; the next owner may run its session at the same time. Make the handler return when its context ends")
	}
}

// revokeGrace is how long before RevokeTimeout a revoke cancels the
// attempts still running: a tenth of it, at most 5s.
func revokeGrace(timeout time.Duration) time.Duration { return min(timeout/10, 5*time.Second) }

// onLost releases the lost partitions without committing: another member
// may own them already. Their running attempts are cancelled at once.
func (c *Consumer) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	if c.tx != nil {
		c.tx.rebalanced()
	}
	if names := partitionNames(lost); len(names) > 0 {
		c.log().Warn().Strs("partitions", names).Str("group", c.cfg.Group).
			Msg("partitions lost: dropping them without a commit; records since their last commit are redelivered")
	}
	parts := c.own.lookup(lost)
	c.own.release(parts)
	c.growForget(parts)
	c.flow.reset(cl, lost)
}

// partitionList lists partitions as topic/partition, comma-separated.
func partitionList(parts []*partition) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = fmt.Sprintf("%s/%d", p.key.topic, p.key.partition)
	}
	return strings.Join(out, ", ")
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

// fromCurrent passes on the rebalance callbacks of the member's group
// client only: a client a transactional rejoin replaced (tx_rejoin.go)
// may still call one as it closes, about partitions it no longer has.
func (c *Consumer) fromCurrent(next rebalanceFn) rebalanceFn {
	return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
		if cur := c.client.Load(); cur != nil && cur != cl {
			return
		}
		next(ctx, cl, ps)
	}
}
