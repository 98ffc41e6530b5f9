package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An operator's release of a held session
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#releasing-a-held-session)
// is a release marker in the session's park partition, so that a rebuild
// replays it: a release kept only in memory would be undone by the next
// owner, or by this member after a restart, replaying the hold marker
// with nothing after it. ReleaseHeld (lanes park release) writes one
// without Go and without knowing which member owns the session; the
// partition's owner, which polls the end of the park partitions where it
// holds sessions, reads it and releases the session. ReleaseParked, on
// the owner, writes one under its own epoch and releases the session once
// it is acknowledged.

// releaseEvery is how often the park loop looks for release markers in
// the park partitions where this member holds sessions: the park delay,
// between 200 ms and 5 s.
func releaseEvery(delay time.Duration) time.Duration {
	return min(max(delay, 200*time.Millisecond), 5*time.Second)
}

// release is the release marker of session for park partition (source,
// part), written under epoch: the park offset of its writer's fence when
// the partition's owner writes it (ReleaseParked), -1 when an operator
// does from outside the group (ReleaseHeld). The identity rules take a
// release of the group whatever its epoch; the epoch says who wrote it.
func (io *parkIO) release(source string, part int32, session string, epoch int64) *kgo.Record {
	return &kgo.Record{Topic: io.topic(source), Partition: part, Key: []byte(session), Headers: io.w.Meta(parkset.KindRelease, session, epoch)}
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
		if err := cl.ProduceSync(ctx, io.release(topic, p.Partition, session, -1)).FirstErr(); err != nil {
			return nil, fmt.Errorf("consumer: release held: write the release marker of session %q to %s/%d: %w", session, io.topic(topic), p.Partition, err)
		}
	}
	return held, nil
}

// ReleaseParked lets a parked session held after its retry budget was
// spent (ParkHold) be retried again at once: an operator's decision once
// its dependency is back. session is the session ID (for records without
// a session, see Config.SessionKey). It writes a release marker to the
// session's park partition and releases the session once the marker is
// acknowledged, so that the release outlives this member: the next owner,
// or this member after a restart, replays it after the hold. The hold
// then ends for good, whether or not anything of the session was parked
// behind it; a retry that spends the budget again holds the session again.
//
// It reports whether the session was held on that partition of this
// member and is released now. It waits at most Config.CommitTimeout for
// the marker; a write that fails or times out is logged, and the session
// stays held. ReleaseParkedContext says why it returned false.
func (c *Consumer) ReleaseParked(topic string, partition int32, session string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CommitTimeout)
	defer cancel()
	err := c.ReleaseParkedContext(ctx, topic, partition, session)
	if err != nil && !errors.Is(err, ErrNotHeld) {
		c.log().Error().Err(err).Str("topic", topic).Int32("partition", partition).Str("session", session).
			Msg("park: held session not released")
	}
	return err == nil
}

// ReleaseParkedContext is ReleaseParked, waiting for the release marker
// until ctx ends. It returns nil once the session is released, an error
// wrapping ErrNotHeld when the session is not held on that partition of
// this member (released already, never held, or the partition is another
// member's: ReleaseHeld and lanes park release find it wherever it is),
// and another error, the session still held, when the marker could not be
// written: check that the park topic exists and accepts this member's
// writes, then release the session again. A marker written late
// after such an error, once acknowledged, still releases the session: the
// owner picks it up as it does ReleaseHeld's.
func (c *Consumer) ReleaseParkedContext(ctx context.Context, topic string, partition int32, session string) error {
	p := c.own.get(partKey{topic, partition})
	if p == nil || !p.parkHeld(session) {
		return fmt.Errorf("%w: session %q on %s/%d of this member (released already, never held, or the partition is another member's: consumer.ReleaseHeld and lanes park release find it wherever it is)",
			ErrNotHeld, session, topic, partition)
	}
	rec := c.park.release(topic, partition, session, p.parkEpoch())
	off, err := c.park.write(ctx, rec)
	if err != nil {
		return fmt.Errorf("consumer: release held session %q on %s/%d: write its release marker to %s/%d: %w; the session stays held: check that the park topic exists and accepts this member's writes, then release it again",
			session, topic, partition, rec.Topic, rec.Partition, err)
	}
	if p.parkReleaseAt(off, c.cfg.Group, session, time.Now()) {
		return fmt.Errorf("consumer: release held session %q on %s/%d: held again by a later hold marker than its release marker at %s/%d offset %d (its retry spent the budget again meanwhile): release it again",
			session, topic, partition, rec.Topic, rec.Partition, off)
	}
	c.log().Info().Str("topic", topic).Int32("partition", partition).Str("session", session).Int64("park_offset", off).
		Msg("park: held session released by an operator (ReleaseParked); its parked head, if any, is retried now")
	return nil
}

// parkHeld reports whether session is held in p's parked set, which this
// member still owns.
func (p *partition) parkHeld(session string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk != nil && p.pk.unavailable == nil && !p.fenced && p.pk.set.IsHeld(session)
}

// parkReleaseAt applies the release marker of session this member wrote
// for group at park offset off, as a pickup does (parkReleases, without
// moving the pickup's tail: what others wrote before off is still to be
// read). It
// reports whether the session is held still: by a hold marker written
// after the release. A partition fenced meanwhile holds nothing of it:
// its next owner replays the marker.
func (p *partition) parkReleaseAt(off int64, group, session string, now time.Time) (held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced || p.pk == nil {
		return false
	}
	e := parkset.Entry{Kind: parkset.KindRelease, Group: group, Session: session}
	if p.pk.set.ApplyRelease(off, e, now) {
		p.tr.Touch() // the park position may have moved past the hold: due for a commit
	}
	return p.pk.set.IsHeld(session)
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
