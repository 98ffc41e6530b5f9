package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
)

// sessionClass is what a growth from FROM to TO partitions does to a
// session, by where the producer's scheme places its key (hashring, as
// lanes' consumer decides which records wait: regrow.OldHomes).
type sessionClass uint8

const (
	// classStays: the same partition under every count from FROM to TO;
	// its records never wait.
	classStays sessionClass = iota
	// classChecked: the same partition under FROM and TO, another under a
	// count between (Kafka's partitioner, modulo the count): the consumer
	// cannot tell that no producer placed it with a count between, so its
	// first records placed with TO wait too.
	classChecked
	// classMoved: another partition under TO than under FROM.
	classMoved
)

// classes is every session's class, by name.
type classes map[string]sessionClass

func classify(names []string, g growSpec) classes {
	pl := hashring.Placement{Scheme: g.scheme, Count: g.to}
	cls := classes{}
	for _, name := range names {
		key := []byte(name)
		at, _ := pl.Partition(key, g.to) // counts ≥ 1: no error
		was, _ := pl.Partition(key, g.from)
		cls[name] = classStays
		if was != at {
			cls[name] = classMoved
			continue
		}
		for n := g.from + 1; n < g.to; n++ {
			if q, _ := pl.Partition(key, n); q != at {
				cls[name] = classChecked
				break
			}
		}
	}
	return cls
}

func (cls classes) count(k sessionClass) int {
	n := 0
	for _, c := range cls {
		if c == k {
			n++
		}
	}
	return n
}

// sessionNames are the names of n sessions, as a --stuck run names them.
func sessionNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%05d", i)
	}
	return names
}

// growSide is a --grow run's handler and sender: the sessions' classes,
// when the run began and grew (or would have), and the figures.
type growSide struct {
	w     workload
	g     growSpec
	cls   classes
	l     *lanestest.Ledger
	names []string
	// firstNew is the send time (Unix ns) of the first record the
	// producer placed on a partition of the growth (the earliest sent of
	// those acknowledged there); MaxInt64 while none.
	firstNew atomic.Int64

	mu                     sync.Mutex
	began, growAt, sendEnd time.Time       // set by start, before the first send
	movedLat, othersLat    []time.Duration // messages sent from growAt on: send to handled
	othersIn               int             // others' messages handled between growAt and sendEnd
}

func newGrowSide(w workload, g growSpec, cls classes) *growSide {
	s := &growSide{w: w, g: g, cls: cls, l: lanestest.NewLedger(), names: sessionNames(w.Sessions)}
	s.firstNew.Store(math.MaxInt64)
	return s
}

// start sets the run's clock: the sending begins at began, and the growth
// (in either arm, the same moment) is halfway through it.
func (s *growSide) start(began time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.began, s.growAt, s.sendEnd = began, began.Add(s.w.Duration/2), began.Add(s.w.Duration)
}

// handle times a message from its send, by the class of its session.
func (s *growSide) handle(_ context.Context, m *consumer.Message) error {
	session, rest, _ := strings.Cut(string(m.Record.Value), "|")
	_, at, _ := strings.Cut(rest, "|")
	sleepWork(s.w.Work)
	ns, _ := strconv.ParseInt(at, 10, 64)
	sent, done := time.Unix(0, ns), time.Now()
	moved := s.cls[session] == classMoved
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sent.Before(s.growAt) {
		if moved {
			s.movedLat = append(s.movedLat, done.Sub(sent))
		} else {
			s.othersLat = append(s.othersLat, done.Sub(sent))
		}
	}
	if !moved && !done.Before(s.growAt) && !done.After(s.sendEnd) {
		s.othersIn++
	}
	return nil
}

// send sends the workload at its rate from began, one message per session
// in turn, each numbered in its session and stamped with its send time.
func (s *growSide) send(ctx context.Context, p *producer.Producer) error {
	s.mu.Lock()
	began := s.began
	s.mu.Unlock()
	seqs := make([]int, len(s.names))
	var failed atomic.Pointer[error]
	from := int32(s.g.from)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for i := 0; i < s.w.Messages; {
		due := min(s.w.Messages, int(time.Since(began).Seconds()*float64(s.w.Rate))+1)
		for ; i < due; i++ {
			k := i % len(s.names)
			name, seq, now := s.names[k], seqs[k], time.Now().UnixNano()
			v := fmt.Sprintf("%s|%d|%d", name, seq, now)
			p.SendAsync(ctx, name, []byte(v), func(res producer.Result, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				s.l.Acked(name, seq, res.EventID)
				for res.Partition >= from {
					if was := s.firstNew.Load(); now >= was || s.firstNew.CompareAndSwap(was, now) {
						break
					}
				}
			}, producer.WithSequence(uint64(seq)))
			seqs[k]++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return flushSent(ctx, p, &failed)
}

// result sums a run up: the ledger's verdict on every message, the other
// sessions' rate and latency and the moved ones' latency.
func (s *growSide) result(arm string, stderr io.Writer) GrowResult {
	rep := s.l.Report()
	for i, d := range rep.Details {
		if i == 10 {
			fmt.Fprintf(stderr, "  %s: … %d more\n", arm, len(rep.Details)-i)
			break
		}
		fmt.Fprintf(stderr, "  %s: %s\n", arm, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := GrowResult{Arm: arm, Violations: rep.Violations, Overlaps: rep.Overlaps, Lost: rep.Lost, Duplicates: rep.Duplicates,
		Finished: rep.Lost == 0, Elapsed: time.Since(s.began), Learned: -1}
	if first := s.firstNew.Load(); first != math.MaxInt64 {
		r.Learned = max(0, time.Unix(0, first).Sub(s.growAt))
	}
	r.OthersRate = float64(s.othersIn) / s.sendEnd.Sub(s.growAt).Seconds()
	r.OthersP99 = quantile(s.othersLat, 0.99)
	r.MovedP50, r.MovedP99 = quantile(s.movedLat, 0.5), quantile(s.movedLat, 0.99)
	return r
}

// quantile is the q-quantile of xs (0 for none).
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
