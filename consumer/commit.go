package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

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
			if err := c.commit(ctx, c.ownedAll()); err != nil {
				c.log().Warn().Err(err).Msg("periodic commit failed; will retry next interval")
			}
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
	for _, p := range parts {
		p.mu.Lock()
		wm := p.tr.watermark()
		if wm >= 0 && wm > p.committed {
			if offsets[p.key.topic] == nil {
				offsets[p.key.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.key.topic][p.key.partition] = kgo.EpochOffset{Epoch: -1, Offset: wm}
			marks[p.key] = wm
		}
		p.mu.Unlock()
	}
	if len(marks) == 0 {
		return nil
	}
	start := time.Now()
	var err error
	c.client.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, reqErr error) {
		err = commitErr(resp, reqErr)
	})
	c.stats.commitNanos.Add(time.Since(start).Nanoseconds())
	if err != nil {
		c.stats.commitFailures.Add(1)
		return err
	}
	c.stats.commits.Add(1)
	for _, p := range parts {
		if wm, ok := marks[p.key]; ok {
			p.mu.Lock()
			p.committed = max(p.committed, wm)
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
