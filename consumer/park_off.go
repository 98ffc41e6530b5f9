package consumer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Parking turned off for a group that parked: the park section of a
// partition's commit is kept in its commits (keepParkSections), and the
// member warns when sessions may be parked there (warnParkOff;
// https://github.com/lanesdev/lanes/blob/main/docs/parking.md).

// warnParkOff tells, for parts, partitions with parking off whose group
// commit holds a park section (kept in their commits), whether sessions
// may be parked there. Parking off, the park topic is T + .park (Park
// fields are refused while it is off); it lists that topic's ID and the
// end of each one's park partition, and warns when the topic is not the
// one the kept position is of (both IDs known and different: a park
// suffix of the group's own, or the park topic made again), when the end
// is past the kept position, or when either cannot be read. With the same
// park topic, or IDs unknown (a broker that gives none), and nothing past
// the position nothing is parked for the group: a debug line only. Entries past it may be another group's on the
// same park topic, which only reading them would tell (lanes park inspect
// does): the warning says "may". It only logs, so its two requests get
// a short bound of their own together (parkOffCheckTimeout within ctx),
// and with ctx already ended it checks nothing (a debug line); callers
// run it after what they must not delay (the start positions of an
// assignment) and outside commitMu. when names the caller in its lines:
// "assign" or "commit".
func (c *Consumer) warnParkOff(ctx context.Context, cl *kgo.Client, parts []*partition, when string) {
	if len(parts) == 0 {
		return
	}
	if ctx.Err() != nil { // the commit's or the assignment's context ended: nothing to tell from
		c.log().Debug().Str("group", c.cfg.Group).Int("partitions", len(parts)).
			Msg(when + ": parking is off and the group's commit holds a park position; not checked: the context ended")
		return
	}
	suffix := DefaultParkTopicSuffix
	var parks []string
	for _, p := range parts {
		if t := p.key.topic + suffix; !slices.Contains(parks, t) {
			parks = append(parks, t)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, parkOffCheckTimeout(c.cfg.CommitTimeout))
	defer cancel()
	adm := kadm.NewClient(cl)
	tds, idErr := adm.ListTopics(ctx, parks...)
	ends, listErr := adm.ListEndOffsets(ctx, parks...)
	for _, p := range parts {
		p.mu.Lock()
		_, pc, _ := splitParkMeta(p.parkKept)
		p.mu.Unlock()
		k, park := p.key, p.key.topic+suffix
		end, err := int64(-1), listErr
		if err == nil {
			o, ok := ends.Lookup(park, k.partition)
			if !ok {
				o, ok = ends.Lookup(park, -1) // kadm's entry of a topic not found
			}
			switch {
			case !ok:
				err = fmt.Errorf("no end listed for %s/%d", park, k.partition)
			case o.Err != nil:
				err = o.Err
			default:
				end = o.Offset
			}
		}
		inspect := "lanes park inspect --brokers " + shellWord(strings.Join(c.cfg.Brokers, ",")) + " --group " + shellWord(c.cfg.Group) +
			" --topic " + shellWord(k.topic)
		listedID := ""
		if idErr == nil {
			listedID = idOf(tds[park])
		}
		ev := c.log().Warn()
		switch {
		case err == nil && idErr != nil:
			err = fmt.Errorf("list %s: %w", park, idErr)
			fallthrough
		case err != nil:
			ev.Err(err).Str("topic", k.topic).Int32("partition", k.partition).Str("group", c.cfg.Group).Str("park_topic", park).
				Int64("park_position", pc.pos).
				Msg(when + ": parking is off, but the group's commit holds a park position and the park partition's end could not be read: " +
					"sessions may be parked there (or in a park topic of a suffix of the group's own: lanes park inspect --suffix lists it), and records parked stay there, " +
					"not handled, while their sessions' later records are. Turn parking back on (Config.Park.Enabled) to retry them in order, " +
					"or list them with " + inspect + "; the position is kept in this member's commits meanwhile")
		case pc.ids.park != "" && listedID != "" && listedID != pc.ids.park:
			ev.Str("topic", k.topic).Int32("partition", k.partition).Str("group", c.cfg.Group).Str("park_topic", park).
				Int64("park_position", pc.pos).Str("committed_park_topic_id", pc.ids.park).Str("park_topic_id", listedID).
				Msg(when + ": parking is off, but the group's commit holds a park position of another park topic than " + park +
					" (a park suffix of the group's own, or the park topic made again): sessions may be " +
					"parked there, and records parked stay there, not handled, while their sessions' later records are. Turn parking " +
					"back on (Config.Park.Enabled, with the group's Park.TopicSuffix) to retry them in order, or list them with " +
					inspect + " --suffix SUFFIX; the position is kept in this member's commits meanwhile")
		case end > pc.pos:
			ev.Str("topic", k.topic).Int32("partition", k.partition).Str("group", c.cfg.Group).Str("park_topic", park).
				Int64("park_position", pc.pos).Int64("park_end", end).
				Msg(when + ": parking is off, but the park partition has entries past the park position the group committed: " +
					"sessions may be parked there (another group's entries on the same park topic look the same from here), and records " +
					"parked stay there, not handled, while their sessions' later records are. Turn parking back on (Config.Park.Enabled) " +
					"to retry them in order, or list them with " + inspect + "; the position is kept in this member's commits meanwhile")
		default:
			c.log().Debug().Str("topic", k.topic).Int32("partition", k.partition).Str("park_topic", park).
				Int64("park_position", pc.pos).Int64("park_end", end).
				Msg(when + ": parking is off; the group's commit holds a park position with nothing past it in the park partition: " +
					"nothing is parked. The position is kept in this member's commits")
		}
	}
}

// parkOffCheckTimeout bounds warnParkOff's requests: a quarter of the
// commit timeout, at most 2 s.
func parkOffCheckTimeout(commit time.Duration) time.Duration { return min(commit/4, 2*time.Second) }

// keepParkSections reads, for partitions of parts with parking off whose
// group commit could not be read at assignment, that commit's park
// section: their commits keep it (partition.parkKept). Until it is read
// they commit nothing. It returns those whose section it kept, for
// warnParkOff once commitMu is released.
func (c *Consumer) keepParkSections(ctx context.Context, parts []*partition) (kept []*partition) {
	for _, p := range parts {
		p.mu.Lock()
		unread := p.pk == nil && p.parkOffUnread
		p.mu.Unlock()
		if !unread {
			continue
		}
		meta, err := c.committedMeta(ctx, c.client.Load(), p.key)
		if err != nil {
			c.log().Debug().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).
				Msg("commit: cannot read the group's commit of the partition yet (a park section to keep?); it is not committed until it can be")
			continue
		}
		if p.parkCommitted(meta) {
			kept = append(kept, p)
		}
	}
	return kept
}
