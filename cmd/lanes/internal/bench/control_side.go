package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// controlRole is what a --control run does with a session: nothing (the
// others, measured), pause it or limit it.
type controlRole uint8

const (
	roleOther controlRole = iota
	rolePaused
	roleLimited
)

// controlRoles is every session's role, by name.
type controlRoles map[string]controlRole

// assignRoles gives the share of names a role, spread evenly over them
// (controlCount of them), paused and limited in turn.
func assignRoles(names []string, share float64) controlRoles {
	n, roles, k := controlCount(len(names), share), controlRoles{}, 0
	for i, name := range names {
		roles[name] = roleOther
		if i*n/len(names) != (i+1)*n/len(names) {
			roles[name] = []controlRole{rolePaused, roleLimited}[k%2]
			k++
		}
	}
	return roles
}

func (r controlRoles) count(role controlRole) int {
	n := 0
	for _, x := range r {
		if x == role {
			n++
		}
	}
	return n
}

// controlSide is a --control run's handler: the sessions' roles, when
// the sending began, and the other sessions' figures. The paused and
// limited sessions' calls are read from the ledger at the end.
type controlSide struct {
	w                      workload
	roles                  controlRoles
	l                      *lanestest.Ledger
	names                  []string
	othersSent, pausedSent int
	began                  atomic.Int64 // the first send, Unix ns
	othersDone             atomic.Int64

	mu       sync.Mutex
	lat      []time.Duration // other sessions: send to handled
	inWindow int             // other sessions' messages handled while the sending lasted
}

func newControlSide(w workload, roles controlRoles) *controlSide {
	s := &controlSide{w: w, roles: roles, l: lanestest.NewLedger(), names: sessionNames(w.Sessions)}
	for k, name := range s.names {
		switch roles[name] {
		case roleOther:
			s.othersSent += sentTo(w, k, len(s.names))
		case rolePaused:
			s.pausedSent += sentTo(w, k, len(s.names))
		}
	}
	return s
}

// handle works every message; it times the other sessions' ones.
func (s *controlSide) handle(_ context.Context, m *consumer.Message) error {
	session, rest, _ := strings.Cut(string(m.Record.Value), "|")
	_, at, _ := strings.Cut(rest, "|")
	sleepWork(s.w.Work)
	if s.roles[session] != roleOther {
		return nil
	}
	ns, _ := strconv.ParseInt(at, 10, 64)
	done := time.Now()
	s.othersDone.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat = append(s.lat, done.Sub(time.Unix(0, ns)))
	if done.Sub(time.Unix(0, s.began.Load())) <= s.w.Duration {
		s.inWindow++
	}
	return nil
}

// result sums a run up: the other sessions' rate and latency while the
// controls held (until lifted; zero: never), the paused and limited
// sessions' calls meanwhile, and the ledger's verdict on every message of
// every session, the controlled ones' included: by the end, after the
// controls were lifted, each was to be handled once, in order.
func (s *controlSide) result(arm string, lifted time.Time, stderr io.Writer) ControlResult {
	rep := s.l.Report()
	r := ControlResult{Arm: arm, PausedSent: s.pausedSent, Violations: rep.Violations, Overlaps: rep.Overlaps,
		Duplicates: rep.Duplicates, Lost: rep.Lost, Finished: rep.Lost == 0, Elapsed: time.Since(time.Unix(0, s.began.Load()))}
	starts := map[string][]time.Time{} // limited sessions' successful calls
	for _, c := range s.l.Calls() {
		if !lifted.IsZero() && !c.Start.Before(lifted) {
			continue
		}
		switch s.roles[c.Session] {
		case rolePaused:
			r.PausedHandled++
		case roleLimited:
			if c.OK {
				starts[c.Session] = append(starts[c.Session], c.Start)
				r.LimitedHandled++
			}
		}
	}
	r.LimitedRate, r.LimitedMinGap = limitedRate(starts)
	for i, d := range rep.Details {
		if i == 10 {
			fmt.Fprintf(stderr, "  %s: … %d more\n", arm, len(rep.Details)-i)
			break
		}
		fmt.Fprintf(stderr, "  %s: %s\n", arm, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.OthersRate = float64(s.inWindow) / s.w.Duration.Seconds()
	r.OthersP99 = quantile(s.lat, 0.99)
	return r
}

// limitedRate is the highest rate of one limited session, (calls − 1) ÷
// the time from its first call's start to its last's, and the shortest
// time between two of one session's calls: with a burst of 1, never below
// 1 ÷ the rate. 0 and 0 when no session had two calls.
func limitedRate(starts map[string][]time.Time) (rate float64, gap time.Duration) {
	for _, ts := range starts {
		if len(ts) < 2 {
			continue
		}
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		if span := ts[len(ts)-1].Sub(ts[0]); span > 0 {
			rate = max(rate, float64(len(ts)-1)/span.Seconds())
		}
		for i := 1; i < len(ts); i++ {
			if d := ts[i].Sub(ts[i-1]); gap == 0 || d < gap {
				gap = d
			}
		}
	}
	return rate, gap
}
