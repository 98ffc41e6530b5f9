package regrow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

// TestHoldModel runs the hold-and-release rule in a randomized world and
// checks every session's records against the order they were produced in
// (the reference), and that everything is handled in the end.
//
// The world: sessions whose producers (one per session, as lanes' ordering
// assumes) learn a growth at random moments after it; the topic grows once
// or twice; the member reads each partition up to a fetched position that
// advances at random, commits its contiguous watermarks at random
// moments (the rule reads committed offsets, which lag), learns counts
// from stamps and from the commits of others, measures end offsets late,
// loses released sessions at random (a rebalance: the next owner knows
// none), and settles a change once its producers all moved and the old
// partitions' commits passed their ends measured after that.
//
// Sessions are parked at random (a record that keeps failing moves, with
// its session's later records on its partition, out of the partition's
// way) and retried at random: a moved session parked on an old partition
// is parked on its new one too, and its retry there waits until the old
// partition's commits no longer name it.
func TestHoldModel(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 150
	}
	for seed := range uint64(seeds) {
		if err := runHoldModel(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

type mrec struct {
	session int
	seq     int
	pl      hashring.Placement
	handled bool
	parked  bool // out of its partition's way, in a park queue
}

type world struct {
	rng       *rand.Rand
	scheme    hashring.Scheme
	logs      [][]*mrec // per partition
	count     int       // the topic's count now
	prodCount []int     // the count each session's producer hashes over
	seqs      []int     // records produced per session
	handled   []int     // records handled per session
	fetched   []int     // per partition: how far the member has read
	committed []int64   // per partition: the group's committed offset
	hist      History
	floors    []*Floors       // per partition
	published []map[int]int64 // per partition: the floors its last commit carried
	holds     Holds
	waiting   map[waitKey]*Wait // the wait each lane head is in
	measureAt map[int32]int64   // the change's settle barriers, once measured
	parkq     []map[int][]*mrec // per partition: each parked session's records, oldest first
	pubParked []map[int]int     // per partition: the sessions its last commit named parked, with their oldest parked count (nil: none published)
	draining  bool              // nothing fails any more
	err       error             // an order broken by a parked retry
	now       time.Time
}

func runHoldModel(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := &world{rng: rng, scheme: hashring.Scheme(1 + rng.IntN(2)), count: 1 + rng.IntN(4), now: time.Unix(1_000_000, 0)}
	sessions := 3 + rng.IntN(12)
	w.prodCount = make([]int, sessions)
	w.seqs = make([]int, sessions)
	w.handled = make([]int, sessions)
	for i := range w.prodCount {
		w.prodCount[i] = w.count
	}
	w.grow(w.count) // the partitions
	w.hist.Observe(w.count, w.now)
	w.waiting = map[waitKey]*Wait{}
	growths := 1 + rng.IntN(3)
	for step := 0; step < 600; step++ {
		w.now = w.now.Add(time.Millisecond)
		switch r := rng.IntN(100); {
		case r < 30:
			w.produce(rng.IntN(sessions))
		case r < 32 && growths > 0:
			growths--
			w.grow(w.count + 1 + rng.IntN(5))
		case r < 40:
			s := rng.IntN(sessions)
			w.prodCount[s] = w.count // this session's producer learns the count
		case r < 50:
			w.fetch(rng.IntN(len(w.logs)), 1+rng.IntN(4))
		case r < 58:
			w.commit()
		case r < 62:
			w.measure()
		case r < 64:
			w.holds.Release(w, true)
		case r < 66:
			w.retryParked(rng.IntN(len(w.logs)))
		case r < 68:
			w.lose(int32(rng.IntN(len(w.logs))))
		case r < 70:
			w.settle()
		default:
			if err := w.handleSome(); err != nil {
				return err
			}
		}
	}
	// Drain: producers all moved, no more records, nothing fails; everything
	// must end.
	w.draining = true
	for s := range w.prodCount {
		w.prodCount[s] = w.count
	}
	for i := 0; i < 20_000; i++ {
		w.now = w.now.Add(time.Millisecond)
		for p := range w.logs {
			w.fetch(p, len(w.logs[p]))
		}
		if err := w.handleSome(); err != nil {
			return err
		}
		w.commit()
		w.measure()
		w.holds.Release(w, true)
		for p := range w.logs {
			w.retryParked(p)
		}
		w.settle()
		if w.done() {
			return nil
		}
	}
	return fmt.Errorf("stuck: handled %v of %v; %d waiting; history %+v", w.handled, w.seqs, w.holds.Len(), w.hist)
}

func (w *world) grow(n int) {
	for len(w.logs) < n {
		w.logs = append(w.logs, nil)
		w.fetched = append(w.fetched, 0)
		w.committed = append(w.committed, 0)
		w.floors = append(w.floors, NewFloors(0))
		w.published = append(w.published, nil)
		w.parkq = append(w.parkq, map[int][]*mrec{})
		w.pubParked = append(w.pubParked, nil)
	}
	w.count = n
}

func (w *world) produce(s int) {
	pl := hashring.Placement{Scheme: w.scheme, Count: w.prodCount[s]}
	p, _ := pl.Partition(key(s), pl.Count)
	w.logs[p] = append(w.logs[p], &mrec{session: s, seq: w.seqs[s], pl: pl})
	w.seqs[s]++
}

func key(s int) []byte { return fmt.Appendf(nil, "session-%d", s) }

func (w *world) fetch(p, n int) {
	to := min(len(w.logs[p]), w.fetched[p]+n)
	for o := w.fetched[p]; o < to; o++ {
		w.floors[p].Add(uint64(o), int64(o), w.logs[p][o].pl.Count)
	}
	w.fetched[p] = to
}

// commit publishes each partition's watermark and, during a change, its
// floors, as its owner's commit does.
func (w *world) commit() {
	for p, log := range w.logs {
		o := 0
		for o < len(log) && (log[o].handled || log[o].parked) {
			o++
		}
		w.committed[p] = int64(o)
		w.published[p], w.pubParked[p] = nil, nil
		if w.hist.Changing() {
			w.published[p] = map[int]int64{}
			for level := 1; level <= 32; level++ {
				w.published[p][level] = w.floors[p].Floor(level, func(seq uint64) bool { return log[seq].handled || log[seq].parked }, int64(o), int64(w.fetched[p]))
			}
			w.pubParked[p] = map[int]int{}
			for s, q := range w.parkq[p] {
				oldest := q[0].pl.Count
				for _, r := range q {
					oldest = min(oldest, r.pl.Count)
				}
				if oldest < w.hist.Newest() {
					w.pubParked[p][s] = oldest
				}
			}
		}
	}
}

// Floor is Olds.Floor: what q's last commit published.
func (w *world) Floor(_ string, q int32, level int) (int64, bool) {
	f, ok := w.published[q][level]
	return f, ok
}

// Parked is Olds.Parked: a session q's last commit named with an older
// count than level, or any when it named none (not known to be free).
func (w *world) Parked(_ string, q int32, session string, level int) bool {
	if w.pubParked[q] == nil {
		return true
	}
	var s int
	fmt.Sscan(session, &s)
	oldest, ok := w.pubParked[q][s]
	return ok && oldest < level
}

// retryParked retries the head of one random session parked on p: it
// waits while the session may be parked on an old partition of it; it
// fails at random (not while draining); else it is handled, in order.
func (w *world) retryParked(p int) {
	var ss []int
	for s := range w.parkq[p] {
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return
	}
	slices.Sort(ss)
	s := ss[w.rng.IntN(len(ss))]
	r := w.parkq[p][s][0]
	if ParkedAway(w.hist, w, Part{"t", int32(p)}, r.pl, key(s), fmt.Sprint(s)) {
		return
	}
	if !w.draining && w.rng.IntN(3) == 0 {
		return // failed again
	}
	if r.seq != w.handled[s] && w.err == nil {
		w.err = fmt.Errorf("session %d: parked record %d retried after %d (on partition %d, stamped %v; history %+v): %s",
			s, r.seq, w.handled[s]-1, p, r.pl, w.hist, w.dump(s))
	}
	r.handled = true
	w.handled[s]++
	if w.parkq[p][s] = w.parkq[p][s][1:]; len(w.parkq[p][s]) == 0 {
		delete(w.parkq[p], s)
	}
}

// lose is a rebalance of partition p: the member forgets what it knew of
// it, and the records waiting there end (fenced) and wait afresh when read
// again.
func (w *world) lose(p int32) {
	at := Part{"t", p}
	w.holds.Forget(at)
	for k, wt := range w.waiting {
		if k.at == at {
			w.holds.Leave(wt)
			delete(w.waiting, k)
		}
	}
}

// dump describes session s's records, for a failure.
func (w *world) dump(s int) string {
	out := ""
	for p, log := range w.logs {
		for o, r := range log {
			if r.session == s {
				out += fmt.Sprintf("p%d@%d seq%d %v h%v pk%v; ", p, o, r.seq, r.pl, r.handled, r.parked)
			}
		}
	}
	return out + fmt.Sprintf("published parked: %v", w.pubParked)
}

// park moves r, of session s on p, to p's park queue.
func (w *world) park(p int32, r *mrec) {
	r.parked = true
	w.parkq[p][r.session] = append(w.parkq[p][r.session], r)
}

func (w *world) measure() {
	for _, q := range w.holds.Unmeasured()["t"] {
		w.holds.Measured("t", q, int64(len(w.logs[q])), w.now.Add(time.Nanosecond))
	}
}

// settle ends a change the way the consumer does: once every producer
// hashes over the newest count (the grace period), the old partitions'
// ends are measured, and once the commits passed them the history keeps
// the newest count only.
func (w *world) settle() {
	if !w.hist.Changing() || slices.ContainsFunc(w.prodCount, func(c int) bool { return c != w.count }) {
		return
	}
	if w.measureAt == nil {
		w.measureAt = map[int32]int64{}
		for q := range w.hist.Counts[len(w.hist.Counts)-2] {
			w.measureAt[int32(q)] = int64(len(w.logs[q]))
		}
		return
	}
	for q, end := range w.measureAt {
		if f, ok := w.Floor("t", q, w.hist.Newest()); !ok || f < end {
			return
		}
	}
	for q := range w.logs {
		if w.pubParked[q] == nil || len(w.pubParked[q]) > 0 {
			return // a session parked with older records: the change is not over
		}
	}
	w.hist.Settle()
	w.holds.Settled("t")
	w.measureAt = nil
}

// handleSome lets each partition's member try the head of one random
// session lane: a fetched record whose session has nothing earlier
// unhandled on that partition.
func (w *world) handleSome() error {
	for p := range w.logs {
		var heads []int
		seen := map[int]bool{}
		for o := 0; o < w.fetched[p]; o++ {
			r := w.logs[p][o]
			if !r.handled && !r.parked && !seen[r.session] {
				seen[r.session] = true
				heads = append(heads, o)
			}
		}
		if len(heads) == 0 {
			continue
		}
		o := heads[w.rng.IntN(len(heads))]
		if err := w.try(int32(p), w.logs[p][o]); err != nil {
			return err
		}
	}
	return w.err
}

func (w *world) try(p int32, r *mrec) error {
	k := waitKey{Part{"t", p}, fmt.Sprint(r.session), r.pl.Count}
	if wt := w.waiting[k]; wt != nil {
		select {
		case <-wt.Released:
			w.holds.Leave(wt)
			delete(w.waiting, k)
			if wt.ParkedOn >= 0 {
				w.park(p, r) // its session is parked on an old partition: behind it
				return nil
			}
		default:
			return nil // still waiting
		}
	} else {
		if w.hist.Learn([]int{r.pl.Count}, time.Time{}, w.now) && w.measureAt != nil {
			w.measureAt = nil // a newer change: its grace starts again
		}
		if wt := w.holds.Enter(k.at, k.session, r.pl.Count, OldHomes(w.hist, r.pl, key(r.session), p), w.now); wt != nil {
			w.waiting[k] = wt
			return nil
		}
	}
	if len(w.parkq[p][r.session]) > 0 {
		w.park(p, r) // forwarded behind its parked session, once it waited as moved
		return nil
	}
	if !w.draining && w.rng.IntN(12) == 0 {
		w.park(p, r) // it keeps failing
		return nil
	}
	if r.seq != w.handled[r.session] {
		return fmt.Errorf("session %d: record %d handled after %d (on partition %d, stamped %v; history %+v)",
			r.session, r.seq, w.handled[r.session]-1, p, r.pl, w.hist)
	}
	r.handled = true
	w.handled[r.session]++
	return nil
}

func (w *world) done() bool {
	for s := range w.seqs {
		if w.handled[s] != w.seqs[s] {
			return false
		}
	}
	return true
}
