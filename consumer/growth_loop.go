package consumer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/regrow"
	"github.com/lanesdev/lanes/hashring"
)

// The growth loop and the moved sessions' waits: a record of a session
// that a topic's growth moved waits on its new partition (waitMoved) until
// the loop, reading the group's commits, finds that the session's old
// partitions have handled what was produced there before it; the loop
// also settles a change once producers had Grace to learn the new count
// (the rules: internal/regrow; the state: growth.go).

// growAssigned gives newly assigned partitions their part in their
// topics' growth, and learns the topics' histories from the group's
// commits (resps, every partition's; nil when they could not be read).
func (c *Consumer) growAssigned(parts []*partition, resps kadm.OffsetResponses) {
	for _, p := range parts {
		p.mu.Lock()
		p.grow.g, p.grow.t, p.grow.track = c.grow, c.grow.topic(p.key.topic), !c.cfg.Growth.Off
		p.grow.sessions = c.cfg.Order[p.key.topic] == OrderSession
		p.mu.Unlock()
	}
	if resps != nil {
		c.settleFrom(c.grow.readCommits(resps, time.Now()))
	}
}

// growForget drops the sessions released on parts, which the member
// gives up (their next owner cannot know them, and makes them wait
// again), and any start readFromStart set for them that the client did
// not apply.
func (c *Consumer) growForget(parts []*partition) {
	for _, p := range parts {
		c.grow.holds.Forget(regrow.Part{Topic: p.key.topic, Partition: p.key.partition})
	}
	c.grow.mu.Lock()
	defer c.grow.mu.Unlock()
	for _, p := range parts {
		delete(c.grow.starts, regrow.Part{Topic: p.key.topic, Partition: p.key.partition}) // never applied to a later assignment, which has a commit by then
	}
}

// observeCounts learns the partition counts of parts' topics from their
// metadata: a count the group's commits do not know starts a change.
func (c *Consumer) observeCounts(ctx context.Context, adm *kadm.Client, parts []*partition) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.key.topic) {
			topics = append(topics, p.key.topic)
		}
	}
	if len(topics) == 0 {
		return
	}
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		c.log().Debug().Err(err).Strs("topics", topics).Msg("assign: cannot read the topics' partition counts; the records' stamps tell them")
		return
	}
	now := time.Now()
	for _, d := range td {
		if d.Err == nil && len(d.Partitions) > 0 {
			c.grow.learn(d.Topic, nil, time.Time{}, len(d.Partitions), now)
		}
	}
}

// observeGrowth learns the consumed topics' partition counts the topic
// loop read (every 30 s): a member that reads no record stamped with a
// new count, and is given no new partition, still learns of a growth, and
// so reports floors for its partitions.
func (c *Consumer) observeGrowth(counts map[string]int) {
	now := time.Now()
	for t, n := range counts {
		if c.cfg.Topics == nil || slices.Contains(c.cfg.Topics, t) {
			c.grow.learn(t, nil, time.Time{}, n, now)
		}
	}
}

// newPartitions returns, of fresh (partitions the group has no commit
// for), those their topic did not have before a change the member knows
// of: they are read from their start whatever StartOffset says, as their
// records are all newer than the group.
func (c *Consumer) newPartitions(fresh []*partition) []*partition {
	var out []*partition
	for _, p := range fresh {
		if h := c.grow.history(p.key.topic); h.Changing() && int(p.key.partition) >= h.Counts[0] {
			out = append(out, p)
		}
	}
	return out
}

// readFromStart makes the client read each of added from its listed start
// (adjustStarts), not from where its reset policy puts a partition with no
// commit.
func (c *Consumer) readFromStart(added []*partition, starts kadm.ListedOffsets) {
	c.grow.mu.Lock()
	defer c.grow.mu.Unlock()
	if c.grow.starts == nil {
		c.grow.starts = map[regrow.Part]int64{}
	}
	for _, p := range added {
		if o, ok := starts.Lookup(p.key.topic, p.key.partition); ok && o.Err == nil {
			c.grow.starts[regrow.Part{Topic: p.key.topic, Partition: p.key.partition}] = o.Offset
		}
	}
}

// adjustStarts is the client's AdjustFetchOffsetsFn: the partitions
// readFromStart named are read from their start (once each).
func (c *Consumer) adjustStarts(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	c.grow.mu.Lock()
	defer c.grow.mu.Unlock()
	for t, ps := range offs {
		for id := range ps {
			k := regrow.Part{Topic: t, Partition: id}
			if at, ok := c.grow.starts[k]; ok {
				ps[id] = kgo.NewOffset().At(at).WithEpoch(-1)
				delete(c.grow.starts, k)
			}
		}
	}
	return offs, nil
}

// movedHold returns the wait w, a started record, is to be in with its
// session before it runs (nil: none). Each wait returned is ended by
// waitMoved.
func (c *Consumer) movedHold(w *work) *regrow.Wait {
	if !w.moves {
		return nil
	}
	at := regrow.Part{Topic: w.p.key.topic, Partition: w.p.key.partition}
	old := regrow.OldHomes(c.grow.history(at.Topic), w.placed, w.rec.Key, at.Partition)
	return c.grow.holds.Enter(at, w.lane, w.placed.Count, old, time.Now())
}

// parkedAway reports whether src, the parked head of lane on p, is of a
// session a growth moved that may still be parked on one of its old
// partitions (as their commits say): its retry waits for those records.
func (c *Consumer) parkedAway(p *partition, lane string, src *kgo.Record) bool {
	if c.cfg.Growth.Off || c.cfg.Order[p.key.topic] != OrderSession {
		return false // only a session's order is kept across a growth
	}
	pl, err := hashring.ParsePlacement(placementOf(src))
	if err != nil {
		return false
	}
	at := regrow.Part{Topic: p.key.topic, Partition: p.key.partition}
	return regrow.ParkedAway(c.grow.history(at.Topic), c.grow, at, pl, src.Key, lane)
}

// waitMoved waits until wt is released, or w's partition is fenced
// (false); parkOn is the wait's ParkedOn. A record of w's session written
// before w that reaches its lane l from another partition meanwhile is run
// (by run) first: its partition's floor may be what w waits for.
//
// Such a record runs here only when the control gate has nothing to say
// of it (freeNow): the lane's admission never ran for it. One the gate may
// hold (its session paused, a rate) ends the wait with back, as does one
// that run gave back: w is then to be given back to l (Consumer.giveBack),
// behind it, so that the lane's admission decides on it first, and the
// lane sleeps without a worker if it holds it; w waits again when it is
// taken again.
func (c *Consumer) waitMoved(l *lane, w *work, wt *regrow.Wait, run func(*work) bool) (ok, back bool, parkOn int32) {
	defer c.grow.holds.Leave(wt)
	c.grow.poke()
	w.p.movedWaiting(w.seq, true)
	defer w.p.movedWaiting(w.seq, false)
	older := l.s.setWait(l, w, w.placed.Count)
	defer l.s.setWait(l, w, 0)
	var free func(*work) bool
	if c.ctl != nil {
		free = c.freeNow
	}
	for {
		for {
			x, held := l.s.takeOlder(l, free)
			if held {
				return true, true, -1
			}
			if x == nil {
				break
			}
			if run(x) {
				return true, true, -1 // x went back to l, ahead of w
			}
			l.s.setWait(l, w, w.placed.Count) // the lane works on w again
		}
		if !w.p.waitFor(w.seq, time.Minute, wt.Released, older) {
			return false, false, -1
		}
		select {
		case <-wt.Released:
			return true, false, wt.ParkedOn
		default:
		}
	}
}

// growthLoop looks every CommitInterval, and at once when a wait begins or
// a change becomes known, while a change or a wait is on: it measures the
// ends the waits and settles need, reads the group's commits, releases the
// waits whose old partitions passed their ends, and settles changes. It
// runs until bg ends.
func (c *Consumer) growthLoop(bg context.Context) {
	if c.cfg.Growth.Off {
		return // nothing waits; added partitions are read from their start at assignment
	}
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-bg.Done():
			return
		case <-t.C:
		case <-c.grow.kick:
		}
		if c.grow.active() {
			c.growthTick(bg, time.Now())
		}
	}
}

// growthTick is one look of the growth loop.
func (c *Consumer) growthTick(bg context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(bg, c.cfg.CommitTimeout)
	defer cancel()
	adm := kadm.NewClient(c.client.Load())
	if topics := c.grow.endsWanted(now, c.cfg.Growth.Grace); len(topics) > 0 {
		asOf := time.Now()
		ends, err := adm.ListCommittedOffsets(ctx, topics...) // the last stable offsets: what read_committed members read
		if err != nil {
			c.log().Debug().Err(err).Strs("topics", topics).Msg("growth: cannot list end offsets; trying again")
			return
		}
		c.grow.measured(ends, asOf, c.cfg.Growth.Grace)
	}
	resps, err := adm.FetchOffsets(ctx, c.cfg.Group)
	if err != nil {
		c.log().Debug().Err(err).Msg("growth: cannot read the group's commits; trying again")
		return
	}
	c.settleFrom(c.grow.readCommits(resps, now))
	released, parked := c.grow.holds.Release(c.grow, c.park != nil)
	c.stats.movedReleased.Add(int64(released))
	c.stats.movedParked.Add(int64(parked))
	c.settleFrom(c.grow.settleDue())
	c.grow.announce(c.log())
}

// settleFrom ends the changes of topics: their waits are released.
func (c *Consumer) settleFrom(topics []settling) {
	for _, s := range topics {
		h, ok := c.grow.settleTopic(s.topic, s.level)
		if !ok {
			continue // a newer count came meanwhile: its change goes on
		}
		t := s.topic
		c.log().Info().Str("topic", t).Int("partitions", h.Newest()).
			Msg("growth settled: the group has handled every record placed with the topic's older partition counts; sessions are no longer checked for a move")
	}
}

// parkMoved parks w, whose session a growth moved and which is parked on
// its old partition on: its retry waits until that partition's commits no
// longer name the session (retryParked).
func (c *Consumer) parkMoved(w *work, on int32) bool {
	now := time.Now()
	reason := fmt.Sprintf("moved: its session is parked on %s/%d, its partition before %s grew", w.p.key.topic, on, w.p.key.topic)
	if !c.parkOut(w, nil, 0, now, now, reason) {
		return false
	}
	l := c.recordLog(noSpan, w)
	l.Info().Int32("old_partition", on).
		Msg("growth: moved session parked behind its records parked on its old partition; it is retried once they are done (lanes park inspect shows both)")
	return true
}
