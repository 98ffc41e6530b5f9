package consumer

import (
	"context"
	"errors"
	"fmt"
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
			if err := c.commit(ctx, parts); err != nil {
				c.log().Warn().Err(err).Msg("periodic commit failed; will retry next interval")
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
	c.own.commitMu.Lock()
	defer c.own.commitMu.Unlock()
	if c.crashed.Load() {
		return nil
	}
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
	var err error
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
	c.client.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, reqErr error) {
		err = commitError(resp, reqErr)
	})
	c.stats.commitNanos.Add(time.Since(start).Nanoseconds())
	c.metrics.commitDone(time.Since(start))
	if err != nil {
		c.stats.commitFailures.Add(1)
		c.stats.commitFailed(err)
		return err
	}
	c.stats.commits.Add(1)
	c.stats.commitFailed(nil)
	for p, cp := range points {
		p.committedAt(cp)
	}
	return nil
}

// commitError folds a commit's request error and per-partition errors into
// one error naming each failed partition.
func commitError(resp *kmsg.OffsetCommitResponse, reqErr error) error {
	if reqErr != nil {
		return fmt.Errorf("%w: %w", ErrCommit, reqErr)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				errs = append(errs, fmt.Errorf("%w: %s partition %d: %w", ErrCommit, t.Topic, p.Partition, e))
			}
		}
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
		if want, active := p.fetchState(); (want && active) || c.brk.openNow() {
			paused[p.key] = p
			if !slices.Contains(topics, p.key.topic) {
				topics = append(topics, p.key.topic)
			}
		}
	}
	if len(paused) == 0 {
		return
	}
	ends, err := kadm.NewClient(c.client).ListEndOffsets(ctx, topics...)
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
