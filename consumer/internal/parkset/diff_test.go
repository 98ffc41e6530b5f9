package parkset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// TestParkSetDifferential drives the parked set and its previous version
// (park_old_test.go: a floor map beside the sessions, times as instants)
// with the same random event sequences and compares every observable
// after each event: whether each session is parked, its head, what it has
// seen, what is due, the park position, the counts. The events are the
// parked set's whole interface, in orders the consumer makes and in
// others (a done or hold marker of a session not parked, a release of one
// with only a floor, a floor forgotten while parked, replays under old
// epochs, re-deliveries below a floor).
func TestParkSetDifferential(t *testing.T) {
	const steps = 300
	seeds := longtest.Size(t, 2000, 200)
	for seed := range uint64(seeds) {
		d := newParkDiff(seed)
		for i := range steps {
			d.step()
			if msg := d.compare(); msg != "" {
				t.Fatalf("seed %d step %d: %s\nevents:\n%s", seed, i, msg, strings.Join(d.log, "\n"))
			}
		}
	}
}

type parkDiff struct {
	rng      *rand.Rand
	rules    Rules
	now      time.Time
	ps       *Set
	old      *oldParkSet
	sessions []string
	src      int64 // next source offset
	park     int64 // next park offset
	wm       int64 // committed source watermark
	epochs   []int64
	log      []string
}

func newParkDiff(seed uint64) *parkDiff {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := Rules{Delay: time.Duration(1+rng.IntN(5)) * time.Second, MaxDelay: 20 * time.Second,
		MaxAttempts: 1 + rng.IntN(4), Hold: rng.IntN(2) == 0}
	d := &parkDiff{rng: rng, rules: r, ps: New(r, ""), old: newOldParkSet(r), epochs: []int64{-1}}
	d.now = d.ps.base.Add(time.Duration(rng.IntN(10)) * time.Second)
	if rng.IntN(4) == 0 {
		d.now = time.Unix(1e9, 0) // long before the set's base, as the model test's clock
	}
	if rng.IntN(2) == 0 { // a rebuild from a committed park position
		pos := int64(1 + rng.IntN(5))
		epoch := int64(rng.IntN(int(pos)+1)) - 1
		f := Fence{epoch, int32(rng.IntN(3)), "classic"}
		d.ps.Begin(pos, f)
		d.old.begin(pos, f)
		d.park, d.epochs = pos, append(d.epochs, epoch)
	}
	for i := range 2 + rng.IntN(4) {
		d.sessions = append(d.sessions, fmt.Sprintf("s%d", i))
	}
	return d
}

func (d *parkDiff) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

// through is a source offset for a marker of s: mostly its head's, else
// any offset seen so far.
func (d *parkDiff) through(s string) int64 {
	if h, ok := d.old.head(s); ok && d.rng.IntN(4) != 0 {
		return h.srcOffset + int64(d.rng.IntN(2))
	}
	return int64(d.rng.IntN(int(d.src) + 1))
}

func (d *parkDiff) step() {
	rng := d.rng
	s := d.sessions[rng.IntN(len(d.sessions))]
	if rng.IntN(3) == 0 {
		d.now = d.now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
	}
	switch k := rng.IntN(16); k {
	case 0, 1, 2: // a record parked or forwarded (or delivered again below the floor)
		src := d.src
		if rng.IntN(5) == 0 && d.src > 0 {
			src = int64(rng.IntN(int(d.src)))
		} else {
			d.src++
		}
		off := d.park
		d.park++
		a, b := d.ps.Add(s, off, src, d.now), d.old.add(s, off, src, d.now)
		d.logf("add(%s, park %d, src %d) = %v / old %v", s, off, src, a, b)
		d.check(a == b, "add")
	case 3: // a source record handled (no park entry), then maybe seen again
		d.src++
	case 4, 5:
		th, off := d.through(s), d.park
		d.park++
		d.ps.Done(s, th, off, d.now)
		d.old.done(s, th, off, d.now)
		d.logf("done(%s, through %d, park %d)", s, th, off)
	case 6:
		th, off := d.through(s), d.park
		d.park++
		d.ps.Held(s, th, off)
		d.old.held(s, th, off)
		d.logf("held(%s, through %d, park %d)", s, th, off)
	case 7:
		a, b := d.ps.Release(s, d.now), d.old.release(s, d.now)
		d.logf("release(%s) = %v / old %v", s, a, b)
		d.check(a == b, "release")
	case 8, 9:
		a, b := d.ps.Due(d.now), d.old.due(d.now)
		slices.Sort(a)
		slices.Sort(b)
		d.logf("due = %v / old %v", a, b)
		d.check(slices.Equal(a, b), "due")
	case 10:
		a, b := d.ps.DueNow(s, d.now), d.old.dueNow(s, d.now)
		d.logf("dueNow(%s) = %v / old %v", s, a, b)
		d.check(a == b, "dueNow")
	case 11:
		a, b := d.ps.Failed(s, d.now), d.old.failed(s, d.now)
		d.logf("failed(%s) = %v / old %v", s, a, b)
		d.check(a == b, "failed")
	case 12:
		d.ps.RetryAbandoned(s)
		d.old.retryAbandoned(s)
		d.logf("retryAbandoned(%s)", s)
	case 13: // a read back that failed: the old set had none; its equivalent
		d.ps.RetryLater(s, d.now)
		d.old.retryAbandoned(s)
		if ss := d.old.sessions[s]; ss != nil {
			ss.notBefore = d.now.Add(d.rules.Delay)
		}
		d.logf("retryLater(%s)", s)
	case 14:
		d.wm = max(d.wm, int64(rng.IntN(int(d.src)+2)))
		d.ps.ForgetBelow(d.wm)
		d.old.forgetBelow(d.wm)
		d.logf("forgetBelow(%d)", d.wm)
	case 15: // a rebuild's entry, under the current epoch or an older one
		off := d.park
		d.park++
		e := Entry{Kind: []Kind{KindRecord, KindDone, KindHold, KindFence}[rng.IntN(4)], Session: s,
			Epoch: d.epochs[rng.IntN(len(d.epochs))], Gen: int32(rng.IntN(4))}
		if e.Kind == KindRecord {
			e.Src = d.src
			d.src++
		} else {
			e.Src = d.through(s)
		}
		if e.Kind == KindFence {
			d.epochs = append(d.epochs, off)
		}
		a, b := d.ps.Replay(off, e, d.now), d.old.replay(off, e, d.now)
		d.logf("replay(%d, %c %s src %d epoch %d) = %v / old %v", off, e.Kind, s, e.Src, e.Epoch, a, b)
		d.check(a == b, "replay")
	}
}

func (d *parkDiff) check(ok bool, what string) {
	if !ok {
		d.logf("  ^ %s differs", what)
	}
}

// compare returns what differs between the two sets, or "".
func (d *parkDiff) compare() string {
	for _, l := range d.log {
		if strings.HasSuffix(l, "differs") {
			return "a result differs"
		}
	}
	ps, old := d.ps, d.old
	if a, b := ps.Position(), old.position(); a != b {
		return fmt.Sprintf("position %d, old %d", a, b)
	}
	if ps.records != old.records || ps.end != old.end || ps.Epoch() != old.w.inForce().Off {
		return fmt.Sprintf("records/end/epoch %d/%d/%d, old %d/%d/%d", ps.records, ps.end, ps.Epoch(), old.records, old.end, old.w.inForce().Off)
	}
	if a, b := ps.Counts(d.now), old.counts(d.now); a != b {
		return fmt.Sprintf("counts %+v, old %+v", a, b)
	}
	for _, s := range d.sessions {
		if a, b := ps.IsParked(s), old.isParked(s); a != b {
			return fmt.Sprintf("isParked(%s) %v, old %v", s, a, b)
		}
		for off := range d.src + 2 {
			if a, b := ps.Seen(s, off), old.seen(s, off); a != b {
				return fmt.Sprintf("seen(%s, %d) %v, old %v", s, off, a, b)
			}
		}
		a, aok := ps.Head(s)
		b, bok := old.head(s)
		if aok != bok || a.ParkOffset != b.parkOffset || a.SrcOffset != b.srcOffset || a.Retries != b.retries ||
			(aok && !ps.at(a.parkedAt).Equal(b.parkedAt)) {
			return fmt.Sprintf("head(%s) %+v %v, old %+v %v", s, a, aok, b, bok)
		}
		ns, os := ps.sessions[s], old.sessions[s]
		if os == nil {
			if ns != nil && ns.parked() {
				return fmt.Sprintf("%s parked, not in the old set", s)
			}
			continue
		}
		if ns.retrying != os.retrying || ns.held != os.held || !ps.at(ns.notBefore).Equal(os.notBefore) && !os.held {
			return fmt.Sprintf("%s retrying/held/notBefore %v/%v/%v, old %v/%v/%v", s, ns.retrying, ns.held,
				ps.at(ns.notBefore), os.retrying, os.held, os.notBefore)
		}
		if ns.held && ns.holdOffset != os.holdOffset {
			return fmt.Sprintf("%s hold offset %d, old %d", s, ns.holdOffset, os.holdOffset)
		}
	}
	return ""
}
