package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitLoop commits every owned partition's watermark each CommitInterval
// until stop is closed.
func (c *Consumer) commitLoop(stop <-chan struct{}) {
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CommitTimeout)
			parts := c.ownedAll()
			if err := c.commit(ctx, parts); err != nil {
				c.log().Warn().Err(err).Msg("periodic commit failed; will retry next interval")
			}
			c.refreshPausedLag(ctx, parts)
			cancel()
		}
	}
}

// commit commits the watermark of each partition that moved since its last
// commit. Commits are serialised, so a revoke's final commit is never
// overtaken by an older periodic one.
func (c *Consumer) commit(ctx context.Context, parts []*partition) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.crashed.Load() {
		return nil
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	marks := map[partKey]int64{}
	meta := map[partKey]string{}
	versions := map[partKey]uint64{}
	for _, p := range parts {
		p.mu.Lock()
		if p.tr.version == p.committedVersion {
			p.mu.Unlock()
			continue // nothing fetched or finished since the last commit
		}
		versions[p.key] = p.tr.version
		wm := p.tr.watermark()
		md := ""
		if !c.cfg.DisableCompletedOffsets {
			md = encodeMetadata(wm, rangesAbove(&p.tr), c.cfg.MaxCommitMetadataBytes)
		}
		if wm >= 0 && (wm > p.committed || md != p.committedMeta) {
			meta[p.key] = md
			if offsets[p.key.topic] == nil {
				offsets[p.key.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.key.topic][p.key.partition] = kgo.EpochOffset{Epoch: -1, Offset: wm}
			marks[p.key] = wm
		} else {
			p.committedVersion = p.tr.version // the commit already says all of it
		}
		p.mu.Unlock()
	}
	if len(marks) == 0 {
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
		err = commitErr(resp, reqErr)
	})
	c.stats.commitNanos.Add(time.Since(start).Nanoseconds())
	c.metrics.commitDone(time.Since(start))
	if err != nil {
		c.stats.commitFailures.Add(1)
		return err
	}
	c.stats.commits.Add(1)
	for _, p := range parts {
		if wm, ok := marks[p.key]; ok {
			p.mu.Lock()
			p.committed = max(p.committed, wm)
			p.committedMeta = meta[p.key]
			p.committedVersion = versions[p.key]
			p.mu.Unlock()
		}
	}
	return nil
}

// commitErr folds a commit's request error and per-partition errors into
// one error naming each failed partition.
func commitErr(resp *kmsg.OffsetCommitResponse, reqErr error) error {
	if reqErr != nil {
		return fmt.Errorf("consumer: commit: %w", reqErr)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				errs = append(errs, fmt.Errorf("consumer: commit %s partition %d: %w", t.Topic, p.Partition, e))
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
		p.mu.Lock()
		if p.paused {
			paused[p.key] = p
			topics = append(topics, p.key.topic)
		}
		p.mu.Unlock()
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
			p.mu.Lock()
			p.hwm = max(p.hwm, o.Offset)
			p.mu.Unlock()
		}
	})
}
