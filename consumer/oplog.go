package consumer

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The operator's view of the member's life: one INFO line per assignment
// and revoke, at the shutdown's start and end, and when a parked session
// is unparked. Durations are logged as duration strings ("30s"), never
// as zerolog's default milliseconds.

// logAssigned logs newly assigned partitions, one line for them all.
func (c *Consumer) logAssigned(assigned map[string][]int32, gen int32, stopping bool) {
	n := countPartitions(assigned)
	if n == 0 {
		return
	}
	msg := "partitions assigned: reading their committed offsets, then handling their records"
	if stopping {
		msg = "partitions assigned during the shutdown: their start positions are committed, none of their records is handled here"
	}
	c.log().Info().Str("group", c.cfg.Group).Int32("generation", gen).Int("count", n).
		Str("partitions", compactPartitions(assigned)).Msg(msg)
}

// logRevoked logs revoked partitions, one line for them all, before their
// drain.
func (c *Consumer) logRevoked(parts []*partition) {
	c.log().Info().Str("group", c.cfg.Group).Int("count", len(parts)).
		Str("partitions", compactPartitions(partsByTopic(parts))).Int("running", runningIn(parts)).
		Stringer("revoke_timeout", c.cfg.RevokeTimeout).
		Msg("partitions revoked: their running handlers get RevokeTimeout to finish, then their progress is committed and the group hands them on")
}

// logShutdownBegin says, when the shutdown begins, what it waits for and
// for how long.
func (c *Consumer) logShutdownBegin(parts []*partition) {
	c.log().Info().Str("group", c.cfg.Group).Int("running", runningIn(parts)).Int("partitions", len(parts)).
		Stringer("shutdown_timeout", c.cfg.ShutdownTimeout).
		Stringer("returns_within", c.cfg.ShutdownTimeout+c.cfg.CommitTimeout+c.cfg.LeaveTimeout).
		Msg("shutdown: fetching stopped; running handlers get ShutdownTimeout to finish, then their contexts are cancelled, progress is committed and the member leaves the group")
}

// logDrainLeft warns, when ShutdownTimeout has passed, of the partitions
// whose handlers still run.
func (c *Consumer) logDrainLeft(left []*partition) {
	if len(left) == 0 {
		return
	}
	c.log().Warn().Str("group", c.cfg.Group).Str("partitions", compactPartitions(partsByTopic(left))).
		Int("running", runningIn(left)).Stringer("shutdown_timeout", c.cfg.ShutdownTimeout).
		Msg("shutdown: handlers still running after ShutdownTimeout: their contexts are cancelled and Run waits for them to return; the next owner runs their records again. Make handlers return when their context ends")
}

// logShutdownEnd says how the shutdown ended, as Run returns err.
func (c *Consumer) logShutdownEnd(err error) {
	ev := c.log().Info()
	msg := "shutdown: done: the work under way finished and its progress is committed; Run returns nil"
	if err != nil {
		ev = c.log().Warn().Err(err)
		msg = "shutdown: done, with what Run returns as its error: the next owner runs the work it names again"
	}
	if at, ok := c.stop.beganAt(); ok {
		ev = ev.Stringer("took", time.Since(at).Round(time.Millisecond))
	}
	ev.Str("group", c.cfg.Group).Msg(msg)
}

// logUnparked says that a parked session's last parked record is done:
// its next records are handled in their partition again.
func (c *Consumer) logUnparked(p *partition, lane string, through int64) {
	c.log().Info().Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("session", lane).
		Int64("through_offset", through).
		Msg("park: session unparked: its parked records are done; its next records are handled in the partition")
}

// stillParked reports whether session lane of p is parked.
func (p *partition) stillParked(lane string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pk != nil && p.pk.set.IsParked(lane)
}

// runningIn counts the handlers (and dead-letter writes) under way in
// parts.
func runningIn(parts []*partition) int {
	n := 0
	for _, p := range parts {
		p.mu.Lock()
		n += p.running
		p.mu.Unlock()
	}
	return n
}

func partsByTopic(parts []*partition) map[string][]int32 {
	out := map[string][]int32{}
	for _, p := range parts {
		out[p.key.topic] = append(out[p.key.topic], p.key.partition)
	}
	return out
}

func countPartitions(ps map[string][]int32) int {
	n := 0
	for _, ids := range ps {
		n += len(ids)
	}
	return n
}

// compactPartitions writes partitions by topic, topics sorted, runs of
// consecutive partitions as ranges: "chats[0-3,7] orders[1]".
func compactPartitions(ps map[string][]int32) string {
	var b strings.Builder
	for _, t := range slices.Sorted(maps.Keys(ps)) {
		ids := slices.Clone(ps[t])
		if len(ids) == 0 {
			continue
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
		b.WriteByte('[')
		for i := 0; i < len(ids); {
			j := i
			for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
				j++
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(ids[i])))
			if j > i {
				b.WriteByte('-')
				b.WriteString(strconv.Itoa(int(ids[j])))
			}
			i = j + 1
		}
		b.WriteByte(']')
	}
	return b.String()
}

// shellWord is s as a POSIX shell reads it back as one word, for a
// command a log line tells the operator to run: as it is when it needs
// no quoting, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// logFetchError logs a partition's fetch error. One error of one topic is
// logged at most every logRepeatEvery, with the number suppressed meanwhile
// (of any of its partitions): a deleted topic's partitions fail on every
// fetch, many times a second.
func (c *Consumer) logFetchError(topic string, partition int32, err error) {
	ok, suppressed := c.pollLog.allow("fetch "+topic+": "+err.Error(), time.Now())
	if !ok {
		return
	}
	e := c.log().Warn().Err(err).Str("topic", topic).Int32("partition", partition).Int("suppressed", suppressed)
	if errors.Is(err, kerr.UnknownTopicID) {
		e.Msg("fetch error: the topic was deleted under the ID this member reads it by; once a topic check finds it made again, lanes re-subscribes to it (readiness says so meanwhile); if the topic stays deleted, create it or fix Config.Topics")
		return
	}
	e.Msg("fetch error; the partition is fetched again")
}

// logCommitError logs a failed periodic commit at most every
// logRepeatEvery (it is retried every CommitInterval, and its error names
// the partitions that failed, which change as they do), with the number
// suppressed meanwhile. Readiness names the partitions failing now.
func (c *Consumer) logCommitError(err error) {
	if ok, suppressed := c.pollLog.allow("periodic commit", time.Now()); ok {
		c.log().Warn().Err(err).Int("suppressed", suppressed).Msg("periodic commit failed; will retry next interval")
	}
}
