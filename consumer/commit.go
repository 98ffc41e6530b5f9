package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitLoop commits every owned partition's watermark each CommitInterval
// until ctx ends; a commit under way ends with it.
func (c *Consumer) commitLoop(bg context.Context) {
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-bg.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(bg, c.cfg.CommitTimeout)
			parts := c.own.all()
			if c.tx != nil {
				// committed in each transaction by the poll loop (tx.go)
			} else if err := c.commit(ctx, parts); err != nil {
				c.logCommitError(err)
			}
			c.refreshPausedLag(ctx, parts)
			cancel()
		}
	}
}

// commit commits the watermark of each partition that moved since its last
// commit and is still owned. Commits and releases are serialised (owners),
// so a revoke's final commit is never overtaken by an older periodic one,
// and no commit covers a partition after its release.
func (c *Consumer) commit(ctx context.Context, parts []*partition) error {
	var kept []*partition                                                  // park sections kept: told once commitMu is released
	defer func() { c.warnParkOff(ctx, c.client.Load(), kept, "commit") }() // runs after the unlock below (deferred later)
	c.own.commitMu.Lock()
	defer c.own.commitMu.Unlock()
	if c.crashed.Load() {
		return nil
	}
	kept = c.keepParkSections(ctx, parts)
	metaMax := c.cfg.MaxCommitMetadataBytes
	if c.cfg.DisableCompletedOffsets {
		metaMax = 0
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	points := map[*partition]commitPoint{}
	meta := map[partKey]string{}
	for _, p := range parts {
		cp, ok := p.toCommit(metaMax)
		if !ok {
			continue
		}
		points[p], meta[p.key] = cp, cp.meta
		if offsets[p.key.topic] == nil {
			offsets[p.key.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.key.topic][p.key.partition] = kgo.EpochOffset{Epoch: -1, Offset: cp.offset}
	}
	if len(points) == 0 {
		return nil
	}
	start := time.Now()
	var failed map[partKey]error
	answered := false
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				md := meta[partKey{t.Topic, t.Partitions[j].Partition}]
				t.Partitions[j].Metadata = &md
			}
		}
		return nil
	})
	c.client.Load().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, reqErr error) {
		failed, answered = refusedCommits(req, resp, reqErr, meta), true
	})
	if !answered {
		failed = refusedCommits(nil, nil, errors.New("the client gave no answer"), meta)
	}
	c.stats.commitNanos.Add(time.Since(start).Nanoseconds())
	c.metrics.commitDone(time.Since(start))
	now := time.Now()
	for p, cp := range points {
		if err := failed[p.key]; err != nil {
			p.commitFailed(err, now)
		} else {
			p.committedAt(cp)
		}
	}
	if len(failed) > 0 {
		c.stats.commitFailures.Add(1)
		return commitError(failed)
	}
	c.stats.commits.Add(1)
	if c.grow.holds.Len() > 0 {
		c.grow.poke() // this commit's floors may release a wait of this member's: look now, not at the next tick
	}
	return nil
}

// refusedCommits maps each partition asked of a commit (the keys of asked)
// that the broker did not acknowledge to its error, wrapping ErrCommit: the
// request's error for every one when the request failed as a whole, else
// the broker's error for the partition. A partition the response does not
// mention was not acknowledged either. Nil when every one was.
func refusedCommits(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, reqErr error, asked map[partKey]string) map[partKey]error {
	failed := map[partKey]error{}
	if reqErr != nil || resp == nil {
		if reqErr == nil {
			reqErr = errors.New("no response")
		}
		for k := range asked {
			failed[k] = fmt.Errorf("%w: %w", ErrCommit, reqErr)
		}
		return failed
	}
	names := map[[16]byte]string{} // v10+ responses name topics by ID
	if req != nil {
		for _, t := range req.Topics {
			names[t.TopicID] = t.Topic
		}
	}
	answered := map[partKey]bool{}
	for _, t := range resp.Topics {
		topic := t.Topic
		if topic == "" {
			topic = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			k := partKey{topic, p.Partition}
			answered[k] = true
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				failed[k] = fmt.Errorf("%w: %w", ErrCommit, e)
			}
		}
	}
	for k := range asked {
		if !answered[k] {
			failed[k] = fmt.Errorf("%w: the broker's answer does not mention the partition", ErrCommit)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// commitError is one error naming each partition of failed, sorted.
func commitError(failed map[partKey]error) error {
	keys := slices.SortedFunc(maps.Keys(failed), func(a, b partKey) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	errs := make([]error, 0, len(keys))
	for _, k := range keys {
		errs = append(errs, fmt.Errorf("%s partition %d: %w", k.topic, k.partition, failed[k]))
	}
	return errors.Join(errs...)
}

// refreshPausedLag asks the brokers (kadm ListEndOffsets) for the end
// offsets of paused partitions: no fetch responses arrive for them, and
// their lag is the signal autoscalers watch.
func (c *Consumer) refreshPausedLag(ctx context.Context, parts []*partition) {
	var topics []string
	paused := map[partKey]*partition{}
	for _, p := range parts {
		if want, active := p.fetchState(); (want && active) || c.brk.OpenNow() {
			paused[p.key] = p
			if !slices.Contains(topics, p.key.topic) {
				topics = append(topics, p.key.topic)
			}
		}
	}
	if len(paused) == 0 {
		return
	}
	ends, err := kadm.NewClient(c.client.Load()).ListEndOffsets(ctx, topics...)
	if err != nil {
		c.log().Debug().Err(err).Msg("list end offsets of paused partitions")
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if p := paused[partKey{o.Topic, o.Partition}]; p != nil && o.Err == nil {
			p.raiseHWM(o.Offset)
		}
	})
}
