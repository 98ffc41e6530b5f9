package consumer

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The topic loop: every topicRecheck (at once after a fetch failed with
// UNKNOWN_TOPIC_ID) it reads whether the consumed, dead-letter and park
// topics exist and under which IDs (topics.go), and re-subscribes to a
// consumed topic made again (the IDs it is read under: topics_recreated.go).

// topicLoop checks the topics when Run starts and again until bg ends:
// every CommitInterval while one is missing, every topicRecheck otherwise,
// and as soon as a fetch fails with UNKNOWN_TOPIC_ID (at most every
// CommitInterval: a deleted topic's fetches fail many times a second). A
// consumed or dead-letter topic found made again is re-subscribed
// (resubscribeRecreated).
func (c *Consumer) topicLoop(bg context.Context) {
	for {
		began := time.Now()
		ctx, cancel := context.WithTimeout(bg, c.cfg.CommitTimeout)
		missing, ids, counts, err := topicState(ctx, c.client.Load(), c.topics.all())
		cancel()
		switch {
		case bg.Err() != nil:
			return
		case err != nil:
			// Unreachable brokers have their own reason; the check runs again.
			c.log().Debug().Err(err).Strs("topics", c.topics.all()).Msg("cannot check that the topics exist")
		default:
			c.topics.update(missing, time.Now())
			c.resubscribeRecreated(bg, ids)
			c.observeGrowth(counts)
		}
		every := topicRecheck
		if c.topics.anyMissing() {
			every = c.cfg.CommitInterval
		}
		t := time.NewTimer(every)
		select {
		case <-bg.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.topics.ids.kick:
			t.Stop()
			if !waitUntil(bg, began.Add(c.cfg.CommitInterval)) {
				return
			}
		}
	}
}

// waitUntil waits until at, or less when bg ends first (false).
func waitUntil(bg context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-bg.Done():
		return false
	}
}

// noteUnknownTopicIDs tells the topic watch of a poll's fetches that failed
// with UNKNOWN_TOPIC_ID: franz-go's answer, on every fetch, once a topic it
// reads was deleted (and perhaps made again). Runs on the poll loop.
func (c *Consumer) noteUnknownTopicIDs(fs kgo.Fetches) {
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				if errors.Is(t.Partitions[k].Err, kerr.UnknownTopicID) {
					c.topics.ids.fetchFailed(t.Topic, t.TopicID, time.Now())
					break
				}
			}
		}
	}
}

// resubscribeRecreated re-subscribes to the topics a check found made
// again (ids: the check's topic IDs). Runs on the topic loop; bg ends it.
func (c *Consumer) resubscribeRecreated(bg context.Context, ids map[string]topicID) {
	found := c.topics.ids.compare(ids, time.Now())
	if len(found) == 0 {
		return
	}
	var consumed []string
	for _, t := range found {
		r := c.topics.ids.pendingOf(t)
		if slices.Contains(c.cfg.Topics, t) {
			consumed = append(consumed, t)
			c.log().Warn().Str("topic", t).Str("old_id", fmtTopicID(r.from)).Str("new_id", fmtTopicID(r.to)).
				Msg("consumed topic deleted and made again (its topic ID changed): re-subscribing to the new topic; this member's partitions of the old one are dropped without a commit, with their records not handled yet; nothing to do unless readiness still says so")
		}
		if t == c.cfg.DeadLetterTopic && c.dlq != nil {
			c.dlq.client.PurgeTopicsFromClient(t) // its next write learns the new topic
			c.log().Warn().Str("topic", t).Str("old_id", fmtTopicID(r.from)).Str("new_id", fmtTopicID(r.to)).
				Msg("dead-letter topic deleted and made again (its topic ID changed): dead-letter copies go to the new topic from now on; those written before are gone with the old one")
		}
	}
	if len(consumed) > 0 {
		if !c.dropTopics(bg, consumed) {
			return // the shutdown began: it handles the partitions
		}
		c.grow.recreated(consumed, time.Now()) // the new topics' partition counts owe nothing to the old ones'
		c.client.Load().PurgeTopicsFromClient(consumed...)
		c.client.Load().AddConsumeTopics(consumed...)
		c.log().Info().Strs("topics", consumed).
			Msg("re-subscribed to consumed topics made again: the group assigns their partitions anew, each read from where Config.StartOffset puts a partition without commits")
	}
	now := time.Now()
	for _, t := range found {
		c.topics.ids.done(t, now)
	}
}

// dropTopics fences this member's partitions of topics, waits up to
// RevokeTimeout for their running handlers and releases them without a
// commit (their attempts still running are cancelled). It reports false,
// releasing nothing, when bg ended meanwhile: the shutdown drains what it
// owns (its commit of the old topic fails: the topic is gone).
func (c *Consumer) dropTopics(bg context.Context, topics []string) bool {
	var parts []*partition
	tps := map[string][]int32{}
	for _, p := range c.own.all() {
		if slices.Contains(topics, p.key.topic) {
			parts = append(parts, p)
			tps[p.key.topic] = append(tps[p.key.topic], p.key.partition)
		}
	}
	for _, p := range parts {
		p.stopStarting()
	}
	busy := waitDrained(bg, parts, c.cfg.RevokeTimeout)
	if bg.Err() != nil {
		return false
	}
	c.own.release(parts)
	c.flow.reset(c.client.Load(), tps)
	if len(parts) > 0 {
		c.log().Warn().Str("partitions", partitionList(parts)).Int("partitions_busy", len(busy)).Stringer("revoke_timeout", c.cfg.RevokeTimeout).
			Msg("partitions of a topic made again dropped without a commit: their records not handled yet were in the old topic; handlers still running after RevokeTimeout had their contexts cancelled")
	}
	return true
}
