package consumer

import (
	"sort"
	"strings"
	"time"
)

// diagnose fills in what Stats learns from the lanes: the session holding
// each partition's watermark, and the sessions with the deepest lanes. One
// pass over the shards, each under its own lock.
func (c *Consumer) diagnose(out *Stats) {
	type held struct {
		p   *partition
		seq uint64
	}
	want := map[held]int{} // → index in out.Partitions
	for _, p := range c.own.all() {
		if seq, ok := p.head(); ok {
			for i := range out.Partitions {
				if ps := &out.Partitions[i]; ps.Topic == p.key.topic && ps.Partition == p.key.partition {
					want[held{p, seq}] = i
				}
			}
		}
	}
	now := stampNow()
	hot := []SessionStats{}
	for _, s := range c.shards {
		s.mu.Lock()
		for _, l := range s.lanes {
			ss := SessionStats{Session: sessionName(l.key), Depth: len(l.queue) + len(l.held)}
			if since := l.since.Load(); since != 0 {
				if len(l.held) == 0 {
					ss.Depth++ // the record under way (a batch's are in held)
				}
				ss.Running, ss.RunningFor = true, time.Duration(now-since)
			}
			// The record the lane works on, whether an attempt runs or
			// not (between retries, in its dead-letter or park write,
			// waiting for the breaker or a hold): a finished one is done,
			// so it matches no partition's holder.
			for _, w := range []*work{l.cur.Load(), l.took} {
				if w != nil {
					note(out, want, held{w.p, w.seq}, w.session)
				}
			}
			for _, q := range [][]*work{l.held, l.queue} {
				for _, w := range q {
					note(out, want, held{w.p, w.seq}, w.session)
					if i, ok := want[held{w.p, w.seq}]; ok && l.asleep != awake {
						out.Partitions[i].HeldWaiting = l.asleep.String()
						out.Partitions[i].Stalled = false // an operator's choice, not a stall
					}
				}
			}
			hot = keepHot(hot, ss)
		}
		s.mu.Unlock()
	}
	out.HotSessions = hot
}

// note names the session of a record that holds a partition's watermark.
func note[K comparable](out *Stats, want map[K]int, k K, session string) {
	if i, ok := want[k]; ok {
		out.Partitions[i].HeldBySession = session
	}
}

// keepHot adds ss to the deepest MaxHotSessions, kept sorted deepest
// first.
func keepHot(hot []SessionStats, ss SessionStats) []SessionStats {
	if len(hot) == MaxHotSessions && ss.Depth <= hot[len(hot)-1].Depth {
		return hot
	}
	i := sort.Search(len(hot), func(i int) bool { return hot[i].Depth < ss.Depth })
	if len(hot) < MaxHotSessions {
		hot = append(hot, SessionStats{})
	}
	copy(hot[i+1:], hot[i:])
	hot[i] = ss
	return hot
}

// sessionName shows a lane's key: the session, or for records without a
// session the partition's shared lane.
func sessionName(key string) string {
	if name, ok := strings.CutPrefix(key, keylessMark); ok {
		return "(no session) " + name
	}
	return key
}
