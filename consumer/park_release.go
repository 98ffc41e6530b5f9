package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An operator's release of a held session, without Go and without knowing
// which member owns it
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#releasing-a-held-session):
// ReleaseHeld (lanes park release) writes a release marker to the session's
// park partition; the partition's owner, which polls the end of the park
// partitions where it holds sessions, reads it and releases the session as
// ReleaseParked does. A rebuild replays it too, so a release written during
// a hand-over is not lost.

// releaseEvery is how often the park loop looks for release markers in
// the park partitions where this member holds sessions: the park delay,
// between 200 ms and 5 s.
func releaseEvery(delay time.Duration) time.Duration {
	return min(max(delay, 200*time.Millisecond), 5*time.Second)
}

// release is the release marker of session for park partition (source,
// part), written by an operator: it carries no owner's epoch.
func (io *parkIO) release(source string, part int32, session string) *kgo.Record {
	return &kgo.Record{Topic: io.topic(source), Partition: part, Key: []byte(session), Headers: io.w.Meta(parkset.KindRelease, session, -1)}
}

// ReleaseHeld releases session, held after its park retry budget was
// spent (ParkHold), for pt.Group on pt.Topic: it finds the partitions
// where the group holds it (as InspectParked does) and writes a release
// marker to each park partition. The member that owns the partition picks
// it up within releaseEvery (at most 5 s) and retries the session's head
// at once; a member that takes the partition later replays it. It returns
// the held sessions released, or an error wrapping ErrNotHeld when the
// session is held nowhere.
func ReleaseHeld(ctx context.Context, pt ParkTarget, session string) ([]ParkedSession, error) {
	pt, err := pt.validate()
	if err != nil {
		return nil, err
	}
	parked, err := InspectParked(ctx, pt)
	if err != nil {
		return nil, err
	}
	brokers, group, topic, suffix, opts := pt.Brokers, pt.Group, pt.Topic, pt.TopicSuffix, pt.ClientOptions
	var held []ParkedSession
	for _, p := range parked {
		if p.Session == session && p.Held {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return nil, fmt.Errorf("%w: session %q of topic %s for group %s (%d sessions parked): list them with lanes park inspect",
			ErrNotHeld, session, topic, group, len(parked))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer: release held: %w", err)
	}
	defer cl.Close()
	io := newParkIO(&Config{Group: group, Park: ParkPolicy{TopicSuffix: suffix}})
	for _, p := range held {
		if err := cl.ProduceSync(ctx, io.release(topic, p.Partition, session)).FirstErr(); err != nil {
			return nil, fmt.Errorf("consumer: release held: write the release marker of session %q to %s/%d: %w", session, io.topic(topic), p.Partition, err)
		}
	}
	return held, nil
}

// pickUpReleases reads, for each partition of this member that holds a
// session, the park partition's entries written since its rebuild or its
// last look by others than this member, and applies the release markers
// of its group.
func (c *Consumer) pickUpReleases(ctx context.Context) {
	var held []*partition
	topics := map[string]bool{}
	for _, p := range c.own.all() {
		if p.parkHolds() {
			held = append(held, p)
			topics[c.park.topic(p.key.topic)] = true
		}
	}
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := kadm.NewClient(c.park.client).ListEndOffsets(ctx, names...)
	if err != nil {
		c.log().Debug().Err(err).Strs("park_topics", names).Msg("park: cannot list the park partitions' ends to look for releases; trying again later")
		return
	}
	for _, p := range held {
		topic := c.park.topic(p.key.topic)
		o, ok := ends.Lookup(topic, p.key.partition)
		from := p.parkTail()
		if !ok || o.Err != nil || o.Offset <= from {
			continue
		}
		entries, err := c.park.entries(ctx, topic, p.key.partition, from, o.Offset, func(*kgo.Record, error) {})
		if err != nil {
			c.log().Debug().Err(err).Str("park_topic", topic).Int32("partition", p.key.partition).
				Msg("park: cannot read the park partition to look for releases; trying again later")
			continue
		}
		for _, s := range p.parkReleases(entries, o.Offset, time.Now()) {
			c.log().Info().Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("session", s).
				Msg("park: held session released by an operator (lanes park release); its parked head is retried now")
		}
	}
}

// parkHolds reports whether p has a held session to look for releases of.
func (p *partition) parkHolds() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk != nil && p.pk.unavailable == nil && !p.fenced && p.pk.set.Counts(time.Time{}).Held > 0
}

// parkTail is where p's next look for releases starts.
func (p *partition) parkTail() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk.tail
}

// parkReleases applies the release markers of p's group among entries
// (read up to end) and returns the sessions they released.
func (p *partition) parkReleases(entries []loggedEntry, end int64, now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return nil
	}
	var out []string
	for _, le := range entries {
		// Only a release of p's group, written after the session's hold
		// (parkset.Set.ApplyRelease): a second release of an earlier hold,
		// read late, is not for this hold.
		if p.pk.set.ApplyRelease(le.off, le.e, now) {
			out = append(out, le.e.Session)
		}
	}
	p.pk.tail = max(p.pk.tail, end)
	if len(out) > 0 {
		p.tr.Touch() // the park position may have moved past the hold: due for a commit
	}
	return out
}
