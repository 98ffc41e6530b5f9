package consumer

import (
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// slowLog collects the watchdog's slow-handler reports.
type slowLog struct {
	mu      sync.Mutex
	reports []slowReport
}

type slowReport struct {
	Offset  int64  `json:"offset"`
	Attempt int32  `json:"attempt"`
	Running string `json:"running"` // a duration string: "1.1s", never zerolog's default milliseconds
	Message string `json:"message"`
}

func (s *slowLog) Write(p []byte) (int, error) {
	var r slowReport
	if err := json.Unmarshal(p, &r); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.reports = append(s.reports, r)
	s.mu.Unlock()
	return len(p), nil
}

// TestWatchdogReportsTheAttemptItTimed races the watchdog's scan against a
// lane that ends attempts and begins the next ones: a report must name the
// record and attempt whose start it timed (never the next one's), and an
// attempt the lane is still in when the race ends is reported: a scan that
// timed the attempt before must not leave the next one marked reported.
func TestWatchdogReportsTheAttemptItTimed(t *testing.T) {
	const timeout = time.Second
	limit := timeout + slowGrace(timeout)
	sink := &slowLog{}
	lg := zerolog.New(sink)
	c := &Consumer{}
	c.cfg.HandlerTimeout, c.cfg.Logger = timeout, &lg
	s := &shard{lanes: map[string]*lane{}}
	c.shards = []*shard{s}
	l := &lane{key: "s", s: s}
	s.lanes["s"] = l
	now := time.Unix(1_700_000_000, 0)
	// Attempt i started limit + i ms before now: the report's running time
	// names the attempt it timed.
	startOf := func(i int) int64 { return stampOf(now.Add(-limit - time.Duration(i)*time.Millisecond)) }
	work := func(i int) *work {
		return &work{rec: &kgo.Record{Topic: "t", Offset: int64(i)}, session: "s"}
	}
	const reports = 150 // race until the watchdog made this many reports
	var stop atomic.Bool
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		for !stop.Load() {
			c.scanSlow(now)
		}
	}()
	i := 0
	for c.stats.slowHandlers.Load() < reports {
		i++
		l.begin(work(i), i, startOf(i), noSpan)
		l.end()
	}
	stop.Store(true)
	<-scanned
	final := i + 1
	l.begin(work(final), final, startOf(final), noSpan)
	c.scanSlow(now)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var finalReported bool
	for _, r := range sink.reports {
		running, err := time.ParseDuration(r.Running)
		if err != nil {
			t.Fatalf("running %q: want a duration string: %v", r.Running, err)
		}
		timed := int64((running - limit) / time.Millisecond)
		if r.Offset != int64(r.Attempt) || timed != r.Offset {
			t.Errorf("report names offset %d attempt %d, but timed attempt %d", r.Offset, r.Attempt, timed)
		}
		finalReported = finalReported || r.Offset == int64(final)
	}
	if !finalReported {
		t.Errorf("the attempt still running past its limit was never reported")
	}
	t.Logf("%d reports over %d attempts", len(sink.reports), final)
}

// A HandlerTimeout as large as a Config accepts (time.Duration's largest,
// "no timeout") reports no attempt as slow and gives up no breaker probe as
// hung: the limit, the timeout plus its grace, must not wrap negative.
func TestWatchdogLargestHandlerTimeout(t *testing.T) {
	cfg, err := Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d",
		HandlerTimeout: math.MaxInt64, Breaker: BreakerPolicy{Enabled: true}}.validate()
	if err != nil {
		t.Fatal(err)
	}
	c, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &slowLog{}
	lg := zerolog.New(sink)
	c.cfg.Logger = &lg
	s := &shard{lanes: map[string]*lane{}}
	c.shards = []*shard{s}
	l := &lane{key: "s", s: s}
	s.lanes["s"] = l
	start := time.Now()
	l.begin(&work{rec: &kgo.Record{Topic: "t"}, session: "s"}, 1, stampOf(start), noSpan)
	c.scanSlow(start.Add(time.Hour))
	if n := c.stats.slowHandlers.Load(); n != 0 {
		t.Errorf("an attempt an hour into a timeout of %v reported slow (%d reports)", cfg.HandlerTimeout, n)
	}
	if c.brk.HungAfter() <= 0 {
		t.Errorf("breaker probes are given up as hung after %v", c.brk.HungAfter())
	}
}
