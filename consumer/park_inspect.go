package consumer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ParkedSession is a parked session as InspectParked finds it in a park
// topic.
type ParkedSession struct {
	Topic     string // the source topic
	Partition int32
	Session   string // the lane: the session ID, or a partition's records without a session
	// Held: its park retry budget was spent (ParkHold); it waits for
	// ReleaseParked.
	Held bool
	// Offsets are the source offsets of its parked records, in order.
	Offsets []int64
	// Since is when its oldest parked record was written to the park topic.
	Since time.Time
	// Retries are the failed retries of its head so far (its attempt
	// markers).
	Retries int
	// HeldThrough is, for a held session, the source offset of the record
	// whose budget was spent (dead-lettered, reason park-exhausted); -1
	// otherwise. Release the session with ReleaseHeld (lanes park
	// release).
	HeldThrough int64
}

// ParkTarget names the parked sessions of one group on one consumed topic,
// for InspectParked and ReleaseHeld.
type ParkTarget struct {
	Brokers []string // seed brokers; required
	Group   string   // the consumer group; required
	Topic   string   // the consumed (source) topic; required
	// TopicSuffix is the group's Park.TopicSuffix: the park topic is Topic
	// + TopicSuffix. Default: [DefaultParkTopicSuffix].
	TopicSuffix string
	// ClientOptions are passed to the franz-go clients (TLS, SASL).
	ClientOptions []kgo.Opt
}

// validate fills the defaults of pt and names a missing field.
func (pt ParkTarget) validate() (ParkTarget, error) {
	switch {
	case len(pt.Brokers) == 0:
		return pt, fmt.Errorf("%w: ParkTarget.Brokers: at least one seed broker is required", ErrConfig)
	case pt.Group == "":
		return pt, fmt.Errorf("%w: ParkTarget.Group: required", ErrConfig)
	case pt.Topic == "":
		return pt, fmt.Errorf("%w: ParkTarget.Topic: required", ErrConfig)
	}
	if pt.TopicSuffix == "" {
		pt.TopicSuffix = DefaultParkTopicSuffix
	}
	return pt, nil
}

// InspectParked lists the sessions parked for pt.Group on pt.Topic as the
// group's members would rebuild them: each park partition is read from the
// group's committed park position to its end, taking only the group's own
// entries in force
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#identity); a
// partition with no committed park position has nothing parked for the
// group. A park topic that does not exist (parking not used for the topic,
// or pt.TopicSuffix is not the group's) is an error wrapping
// ErrTopicMissing. It only reads.
func InspectParked(ctx context.Context, pt ParkTarget) ([]ParkedSession, error) {
	pt, err := pt.validate()
	if err != nil {
		return nil, err
	}
	brokers, group, topic, suffix, opts := pt.Brokers, pt.Group, pt.Topic, pt.TopicSuffix, pt.ClientOptions
	nop := zerolog.Nop()
	cfg := &Config{Brokers: brokers, Group: group, Logger: &nop, FetchMaxWait: DefaultFetchMaxWait, ClientOptions: opts,
		Park: ParkPolicy{TopicSuffix: suffix}}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer: inspect parked: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	park := topic + suffix
	ends, err := adm.ListEndOffsets(ctx, park)
	if err != nil {
		return nil, fmt.Errorf("consumer: inspect parked: end offsets of %s: %w", park, err)
	}
	if o, ok := ends.Lookup(park, -1); ok && errors.Is(o.Err, kerr.UnknownTopicOrPartition) { // kadm's entry of a topic not found
		return nil, fmt.Errorf("consumer: inspect parked: no park topic %s (of %s): parking is not used for %s, or group %s's "+
			"park suffix is not %q (ParkTarget.TopicSuffix; lanes park --suffix): %w", park, topic, topic, group, suffix, ErrTopicMissing)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil // no commits: nothing parked for the group
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: inspect parked: committed offsets of group %s: %w", group, err)
	}
	tds, err := adm.ListTopics(ctx, topic, park)
	if err != nil {
		return nil, fmt.Errorf("consumer: inspect parked: describe %s and %s: %w", topic, park, err)
	}
	ids := topicIDs{source: idOf(tds[topic]), park: idOf(tds[park])}
	io := newParkIO(cfg)
	var out []ParkedSession
	var failed error
	ends.Each(func(o kadm.ListedOffset) {
		if failed != nil {
			return
		}
		if o.Err != nil {
			failed = fmt.Errorf("%s/%d: %w", park, o.Partition, o.Err)
			return
		}
		from := noParkCommit
		if r, ok := committed.Lookup(topic, o.Partition); ok && r.Err != nil {
			failed = fmt.Errorf("the group's commit of %s/%d: %w", topic, o.Partition, r.Err)
			return
		} else if ok && r.At >= 0 {
			_, from, _ = splitParkMeta(r.Metadata)
		}
		start, inForce, _ := parkset.Start(from.committed(), ids.source, ids.park, o.Offset)
		if start >= o.Offset {
			return // nothing in the park partition is the group's
		}
		entries, err := io.entries(ctx, park, o.Partition, start, o.Offset, func(*kgo.Record, error) {})
		if err != nil {
			failed = err
			return
		}
		set := parkset.New(parkset.Rules{MaxAttempts: 1}, group)
		set.SetTopicID(ids.source)
		set.Begin(start, inForce)
		through := map[string]int64{}
		for _, le := range entries {
			if set.Replay(le.off, le.e, le.at) && le.e.Kind == parkset.KindHold {
				through[le.e.Session] = le.e.Src
			}
		}
		for _, ps := range set.ParkedSessions() { // only a floor: unparked, not among them
			p := ParkedSession{Topic: topic, Partition: o.Partition, Session: ps.Session, Held: ps.Held, HeldThrough: -1,
				Offsets: ps.Offsets, Since: ps.Since, Retries: ps.Retries}
			if ps.Held {
				p.HeldThrough = through[ps.Session]
			}
			out = append(out, p)
		}
	})
	if failed != nil {
		return nil, fmt.Errorf("consumer: inspect parked: %w", failed)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Session < out[j].Session
	})
	return out, nil
}
