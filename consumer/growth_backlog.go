package consumer

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/hashring"
)

// A group whose commits carry no growth history (a new group, or one an
// older lanes committed for) learns nothing of a growth from them, and
// the records' stamps teach only newer counts: one that starts on a
// backlog written before its topic grew would run a moved session's new
// records beside its old ones. learnBacklog reads, at assignment, the
// first record the group will read on each partition of such a topic: a
// stamp with an older count than the topic has starts a change, and moved
// sessions wait as they do for a group that ran through the growth.

// learnBacklog learns, for the topics of parts with no growth history in
// the group's commits (resps), the counts stamped on the first record the
// group reads on each of their partitions.
func (c *Consumer) learnBacklog(ctx context.Context, adm *kadm.Client, parts []*partition, resps kadm.OffsetResponses) {
	if c.cfg.Growth.Off {
		return
	}
	var topics []string
	for _, p := range parts {
		if t := p.key.topic; !slices.Contains(topics, t) && !c.grow.committedHistory(t) {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, backlogTimeout(c.cfg.CommitTimeout))
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		var ends kadm.ListedOffsets
		if ends, err = adm.ListEndOffsets(ctx, topics...); err == nil {
			for _, t := range topics {
				err = cmp.Or(err, c.learnFirstStamps(ctx, t, c.readFrom(t, starts, ends, resps)))
			}
		}
	}
	if err != nil {
		c.log().Warn().Err(err).Strs("topics", topics).
			Msg("assign: cannot read the first records of topics the group has no growth history for; if a topic grew before the group started, sessions it moved may be handled out of order")
	}
}

// fromTo is a partition's offsets from where the group reads it up to its
// end.
type fromTo struct{ from, end int64 }

// backlogTimeout bounds learnBacklog: a fifth of CommitTimeout, at most 2
// s, as it delays the first records of an assignment (a partition whose
// first record never comes, a compacted tail say, costs it whole).
func backlogTimeout(commit time.Duration) time.Duration {
	return min(commit/5, 2*time.Second)
}

// readFrom is where the group reads topic's partitions from (its commit,
// else the reset policy's start) up to their ends, for those with records
// there.
func (c *Consumer) readFrom(topic string, starts, ends kadm.ListedOffsets, resps kadm.OffsetResponses) map[int32]fromTo {
	from := map[int32]fromTo{}
	for q, end := range ends[topic] {
		s, ok := starts.Lookup(topic, q)
		if !ok || s.Err != nil {
			continue
		}
		f := int64(-1)
		if r, ok := resps.Lookup(topic, q); ok && r.Err == nil && r.At >= 0 {
			f = max(r.At, s.Offset) // below the log start: it resets there
		} else if c.cfg.StartOffset != StartLatest {
			f = s.Offset
		}
		if end.Err == nil && f >= 0 && f < end.Offset {
			from[q] = fromTo{f, end.Offset}
		}
	}
	return from
}

// learnFirstStamps reads the first record of each span of topic's
// partitions (transaction markers passed over) and learns the counts
// stamped on them.
func (c *Consumer) learnFirstStamps(ctx context.Context, topic string, spans map[int32]fromTo) error {
	if len(spans) == 0 {
		return nil
	}
	at := map[int32]kgo.Offset{}
	for q, s := range spans {
		at[q] = kgo.NewOffset().At(s.from)
	}
	cl, err := newReader(&c.cfg, "growth", topic, at,
		kgo.KeepControlRecords()) // a span that holds only markers ends at its last
	if err != nil {
		return err
	}
	defer cl.Close()
	var counts []int
	defer func() { // what was read is learnt, also when a partition's first record never came
		if len(counts) > 0 {
			c.grow.learn(topic, counts, time.Time{}, 0, time.Now())
			if h := c.grow.history(topic); h.Changing() {
				c.log().Info().Str("topic", topic).Ints("counts", h.Counts).
					Msg("assign: the group starts on records placed before the topic grew; sessions the growth moved wait for their older records")
			}
		}
	}()
	for len(spans) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			s, ok := spans[r.Partition]
			switch {
			case !ok:
			case !r.Attrs.IsControl():
				delete(spans, r.Partition)
				if pl, err := hashring.ParsePlacement(placementOf(r)); err == nil {
					counts = append(counts, pl.Count)
				}
			case r.Offset >= s.end-1:
				delete(spans, r.Partition) // markers only
			}
		})
	}
	return nil
}
