package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// The rebuild of a partition's parked set when it is assigned
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#rebuild-on-assignment
// and #identity): the owner writes its fence, reads its park partition from
// the committed park position up to the fence, and replays the group's own
// entries in force.

// rebuildParks rebuilds the parked set of each newly assigned partition.
// It runs in the assignment callback, before any record of the partitions
// is polled, within twice CommitTimeout for all of them; a failure that
// may pass (a park topic not yet known to the broker answering, just
// after it was created; a write or read failing; the group's commits
// unreadable) is tried again meanwhile. A partition whose rebuild fails
// starts nothing (parkUnavailable) until the park loop's retry succeeds
// (retryRebuild).
func (c *Consumer) rebuildParks(ctx context.Context, cl *kgo.Client, parts []*partition) {
	if _, stopping := c.stop.beganAt(); c.park == nil || len(parts) == 0 || stopping {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*c.cfg.CommitTimeout)
	defer cancel()
	checked := map[string]topicIDs{}
	for _, p := range parts {
		bo := backoff.NewExponentialBackOff()
		bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, time.Second, 0
		for {
			var err error
			ids, ok := checked[p.key.topic]
			if !ok {
				if ids, err = c.park.check(ctx, kadm.NewClient(cl), p.key.topic); err == nil {
					checked[p.key.topic] = ids
				}
			}
			if err == nil {
				err = c.rebuildPark(ctx, cl, p, ids)
			}
			if err == nil {
				break
			}
			if _, stopping := c.stop.beganAt(); stopping {
				c.log().Debug().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).
					Msg("park: the shutdown began during the rebuild of the parked sessions: nothing of the partition is handled here, its commit keeps the park position it found, and its next owner rebuilds them")
				return
			}
			if errors.Is(err, errParkLate) {
				p.parkUnavailable(err, time.Now())
				break
			}
			if errors.Is(err, errParkTopicBad) || !sleepCtx(ctx, bo.NextBackOff()) {
				p.parkUnavailable(err, time.Now())
				c.log().Error().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).
					Str("park_topic", c.park.topic(p.key.topic)).
					Msg("park: cannot rebuild the parked sessions: the partition is held (nothing of it is handled, nothing committed) and the rebuild is tried again, at most every 30 s; fix what the error names (a park topic missing or unfit needs its source's partition count and cleanup.policy=delete)")
				break
			}
		}
	}
}

// retryRebuild tries again the rebuild of a partition held since its
// assignment's failed (the park topic created late, say), within twice
// CommitTimeout; on success the partition's stash goes to its lanes.
func (c *Consumer) retryRebuild(ctx context.Context, p *partition) {
	ctx, cancel := context.WithTimeout(ctx, 2*c.cfg.CommitTimeout)
	defer cancel()
	if _, gen := c.client.Load().GroupMetadata(); gen > 0 {
		// Still the owner after a rebalance since the assignment: its
		// fence carries the generation it is in now. (A member that kept
		// p through a rebalance whose other claimant was gone finds that
		// claimant's fence, of an earlier generation than its own now.)
		p.mu.Lock()
		p.pk.gen = max(p.pk.gen, gen)
		p.mu.Unlock()
	}
	ids, err := c.park.check(ctx, kadm.NewClient(c.client.Load()), p.key.topic)
	if err == nil {
		err = c.rebuildPark(ctx, c.client.Load(), p, ids)
	}
	if err != nil {
		p.parkUnavailable(err, time.Now())
		c.log().Debug().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).
			Msg("park: rebuilding the parked sessions failed again; the partition stays held")
		return
	}
	p.parkAvailable()
	c.log().Info().Str("topic", p.key.topic).Int32("partition", p.key.partition).
		Msg("park: parked sessions rebuilt; the partition is handled again")
}

// sleepCtx waits d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// rebuildPark writes p's owner's fence marker to its park partition and
// replays the partition's entries from the committed park position up to
// it (none without one: nothing before the fence is the group's), under
// the identity rules (internal/parkset); ids are the IDs of the source and
// park topics now.
func (c *Consumer) rebuildPark(ctx context.Context, cl *kgo.Client, p *partition, ids topicIDs) error {
	if err := c.parkReadCommitted(ctx, cl, p); err != nil {
		return err
	}
	p.mu.Lock()
	from, gen, proto := p.pk.from, p.pk.gen, p.pk.proto
	p.mu.Unlock()
	topic := c.park.topic(p.key.topic)
	fence, err := c.park.write(ctx, c.park.w.Fence(p.key.topic, p.key.partition, gen, proto, ids.source, false))
	if err != nil {
		return err
	}
	l := c.log().With().Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("park_topic", topic).
		Int64("park_fence", fence).Int32("generation", gen).Logger()
	start, inForce := c.parkFrom(&l, from, ids, fence)
	read := func(from, to int64) ([]loggedEntry, error) {
		if from >= to {
			return nil, nil
		}
		return c.park.entries(ctx, topic, p.key.partition, from, to, func(r *kgo.Record, err error) {
			c.log().Warn().Err(err).Str("park_topic", topic).Int32("partition", r.Partition).Int64("offset", r.Offset).
				Msg("park: ignoring a record that is no lanes park entry")
		})
	}
	entries, err := read(start, fence)
	if err != nil {
		return err
	}
	own := parkset.Entry{Kind: parkset.KindFence, Group: c.cfg.Group, Gen: gen, Proto: proto, TopicID: ids.source}
	now := time.Now()
	p.mu.Lock()
	set := p.pk.set
	set.SetTopicID(ids.source)
	set.Begin(start, inForce)
	p.pk.levels = nil
	ignored := replayAll(p.pk, entries)
	taken := set.Replay(fence, own, now)
	in := set.InForce()
	p.mu.Unlock()
	if !taken && (!in.OtherProtocol(proto) || p.isFenced()) {
		// A fence of a later owner, of this group protocol, is in force
		// after this owner's: this member lost the partition while it took
		// it up (its assignment callback outlived the rebalance timeout and
		// the group went on without it, or a retried rebuild raced the
		// revoke). It is not the owner: a reset fence would put it in
		// force over the real owner's, whose entries every later rebuild
		// would then ignore.
		l.Warn().Int32("generation_in_force", in.Gen).Int64("fence_in_force", in.Off).Str("protocol", proto).
			Msg("park: a later owner's fence is in force in the park partition: this member lost the partition while taking it up (kicked from the group?); nothing of it is handled or committed here, and franz-go revokes it at the member's next heartbeat")
		return fmt.Errorf("%w: generation %d (%s) in force at park offset %d, this owner's is %d", errParkLate, in.Gen, in.Proto, in.Off, gen)
	}
	if !taken {
		// The group's generations started again: its protocol switched (an
		// empty classic group became a consumer group, whose member
		// epochs start near 1, or back). A reset fence starts the
		// comparison again from this owner's.
		l.Warn().Int32("generation_in_force", in.Gen).Str("protocol_in_force", in.Proto).Int64("fence_in_force", in.Off).Str("protocol", proto).
			Msg("park: the fence in force is of the other group protocol and a higher generation: the group's protocol switched and its generations started again; a reset fence starts the comparison from this owner's")
		reset, err := c.park.write(ctx, c.park.w.Fence(p.key.topic, p.key.partition, gen, proto, ids.source, true))
		if err != nil {
			return err
		}
		more, err := read(fence+1, reset)
		if err != nil {
			return err
		}
		own.Reset = true
		p.mu.Lock()
		ignored += replayAll(p.pk, more)
		taken = set.Replay(reset, own, time.Now())
		p.mu.Unlock()
		if !taken {
			return fmt.Errorf("%w: this owner's reset fence at park offset %d is not in force", errParkTopicBad, reset)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pk.tail, p.pk.ids, p.pk.rebuilt = set.End(), ids, true
	p.tr.Touch()
	ev := l.Debug() // one line per partition at each assignment: Info only when it found something parked
	n := set.Counts(now)
	if n.Records > 0 || n.Held > 0 {
		ev = l.Info()
	}
	ev.Int64("park_from", start).Int("entries", len(entries)).Int("ignored", ignored).
		Int("parked_sessions", n.Sessions).Int("parked_records", n.Records).Msg("park: parked sessions rebuilt")
	return nil
}

// replayAll replays entries into pk's parked set, noting the placement
// counts of the records it parks, and returns how many it ignored (not the
// group's own, or not in force). p.mu held.
func replayAll(pk *partPark, entries []loggedEntry) (ignored int) {
	for _, le := range entries {
		was := pk.set.IsParked(le.e.Session)
		if !pk.set.Replay(le.off, le.e, le.at) { // its write time: Stats show its true age, its head is due Delay after it
			ignored++
			continue
		}
		switch {
		case le.e.Kind == parkset.KindRecord:
			pk.levels.note(le.e.Session, le.e.Src, le.level, was)
		case !pk.set.IsParked(le.e.Session):
			delete(pk.levels, le.e.Session) // unparked by this entry
		}
	}
	return ignored
}

// parkFrom is where a rebuild reads from, and the fence in force there
// (parkset.Start): the committed park section, or the owner's own fence
// with none in force when there is none or it is of another incarnation
// of either topic, or past the park partition's end (fence: the owner's
// fence, its end). It logs why it does not start at the committed one.
func (c *Consumer) parkFrom(l *zerolog.Logger, from parkCommit, ids topicIDs, fence int64) (int64, parkset.Fence) {
	start, f, why := parkset.Start(from.committed(), ids.source, ids.park, fence)
	switch why {
	case parkset.NoPosition:
		l.Debug().Msg("park: no park position committed by this group: nothing in the park partition before this owner's fence is its own (a new group, a re-created topic, an offset reset, or parking turned on now)")
	case parkset.OtherTopic:
		l.Warn().Str("committed_topic_id", from.ids.source).Str("topic_id", ids.source).
			Msg("park: the committed park position is of an earlier incarnation of the topic (deleted and made again): its parked sessions are not this topic's, none is rebuilt")
	case parkset.ParkTopicLost:
		l.Error().Int64("park_position", from.pos).Str("committed_park_topic_id", from.ids.park).Str("park_topic_id", ids.park).
			Msg("park: the park topic was deleted and made again (or truncated) since the group's commit: the sessions parked then are lost, their records are not in it. Do not delete a park topic while sessions are parked (PartitionStats.Park, lanes park inspect); look for them in the source topic and the DLQ")
	}
	return start, f
}

// parkReadCommitted reads p's committed park section when the assignment
// could not: without it the rebuild cannot know where the group's park
// entries start, and reading from the start would take floors of other
// times as the group's.
func (c *Consumer) parkReadCommitted(ctx context.Context, cl *kgo.Client, p *partition) error {
	p.mu.Lock()
	unread := p.pk.unread
	p.mu.Unlock()
	if !unread {
		return nil
	}
	meta, err := c.committedMeta(ctx, cl, p.key)
	if err != nil {
		return fmt.Errorf("read the group's committed offsets (the park position): %w", err)
	}
	p.parkCommitted(meta)
	return nil
}

// committedMeta is the metadata of the group's commit of partition k, ""
// when it has none.
func (c *Consumer) committedMeta(ctx context.Context, cl *kgo.Client, k partKey) (string, error) {
	resps, err := kadm.NewClient(cl).FetchOffsets(ctx, c.cfg.Group)
	if err != nil {
		return "", err
	}
	r, ok := resps.Lookup(k.topic, k.partition)
	switch {
	case ok && r.Err != nil:
		return "", r.Err
	case ok && r.At >= 0:
		return r.Metadata, nil
	}
	return "", nil
}

// parkUnread marks partitions whose group commit could not be read at
// assignment: with parking off, the commit loop reads it before their
// first commit (keepParkSections); with parking on, their rebuild does.
func parkUnread(parts []*partition) {
	for _, p := range parts {
		p.mu.Lock()
		p.parkOffUnread = p.pk == nil
		p.mu.Unlock()
	}
}
