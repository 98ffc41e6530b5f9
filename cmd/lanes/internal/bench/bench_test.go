package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if IsMember() { // a --scale member process: this test binary run again
		os.Exit(MemberMain(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// runJSON runs lanes-lab bench with args and --json and decodes its report
// into a T; stdout and stderr come back too, for the test's messages.
func runJSON[T any](t *testing.T, args ...string) (rep T, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	if err := Run(context.Background(), append(args, "--json"), &o, &e); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, o.String(), e.String())
	}
	if err := json.Unmarshal(o.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, o.String())
	}
	return rep, o.String(), e.String()
}

// TestBenchSmall runs lanes-lab bench end to end on the embedded broker with a
// tiny closed and open workload; no timing is asserted, only that every
// consumer ran and kept order.
func TestBenchSmall(t *testing.T) {
	dir := t.TempDir()
	docs := filepath.Join(dir, "bench.md")
	if err := os.WriteFile(docs, []byte("# Benchmarks\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _, errOut := runJSON[benchReport](t, "--sessions", "40", "--messages", "3000", "--work", "0,200us",
		"--partitions", "4", "--pool", "8", "--docs", docs)
	seen := map[string]int{}
	for _, r := range rep.Results {
		seen[r.Consumer]++
		if r.Violations+r.Overlaps != 0 || r.Handled == 0 {
			t.Errorf("%s on %s: %d violations, %d overlaps, %d handled", r.Consumer, r.Workload, r.Violations, r.Overlaps, r.Handled)
		}
	}
	// raw polling and minimal run only where the work is zero
	want := map[string]int{consLanes: 2, consRaw: 1, consMin: 1, consCeil: 2, consPart: 2, consPool: 2}
	for c, n := range want {
		if seen[c] != n {
			t.Errorf("%s ran %d times, want %d", c, seen[c], n)
		}
	}
	if !strings.Contains(errOut, "workload 2/2") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	md, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Consumer == consLanes && r.OfCeiling <= 0 {
			t.Errorf("lanes on %s: no ratio to the ceiling", r.Workload)
		}
	}
	for _, s := range []string{"kept", docsBegin, docsEnd, "| lanes |", "| ceiling |", "÷ ceiling", "bench/throughput.png", "lanes-lab bench --sessions 40"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("docs lack %q:\n%s", s, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bench", "throughput.png")); err != nil {
		t.Errorf("throughput plot: %v", err)
	}
}

// TestBenchOpenTable runs a short open-mode workload and checks the table.
func TestBenchOpenTable(t *testing.T) {
	var out, errOut bytes.Buffer
	err := Run(context.Background(), []string{"--mode", "open", "--sessions", "20", "--rate", "4000",
		"--duration", "500ms", "--work", "0", "--partitions", "3", "--consumers", "lanes,raw-poll",
		"--transient", "0"}, &out, &errOut)
	if err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, s := range []string{"open 20 sess 4000/s work 0", "lanes", "raw-poll", "p99.9", "viol"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestBenchBadFlags: wrong input is rejected, and the message names the
// one flag that is wrong.
func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions 0"},
		{[]string{"--pool", "-1"}, "--pool -1"},
		{[]string{"--consumers", "lanes,kafka-streams"}, `--consumers: unknown consumer "kafka-streams"`},
		{[]string{"--max-run", "0s"}, "--max-run 0s"},
		{[]string{"--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"--mode", "half-open"}, `--mode "half-open"`},
		{[]string{"--sessions", "0"}, "--sessions 0"},
		{[]string{"--skew", "zipf:0.9"}, `--skew "zipf:0.9"`},
		{[]string{"--skew", "pareto"}, `--skew "pareto"`},
		{[]string{"--work", "1ms,fast"}, `--work "fast"`},
		{[]string{"--work", "-1ms"}, "--work"},
		{[]string{"--transient", "1"}, "--transient 1"},
		{[]string{"--transient", "0.1", "--retry-wait", "0s"}, "--retry-wait 0s"},
		{[]string{"--mode", "open", "--rate", "0"}, "--rate 0"},
		{[]string{"--mode", "open", "--duration", "0s"}, "--duration 0s"},
		{[]string{"--messages", "-5"}, "--messages -5"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--rounds", "0"}, "--rounds 0: need at least 1"},
		{[]string{"--rounds", "2", "--scale", "1,2"}, "--rounds 2: not used with --scale"},
	} {
		_, err := parseBench(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseBench(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	c, err := parseBench(nil, &bytes.Buffer{})
	if err != nil || len(c.workloads) < 5 {
		t.Fatalf("default suite: %v, %d workloads", err, len(c.workloads))
	}
	if c, err = parseBench([]string{"--rounds", "3"}, &bytes.Buffer{}); err != nil || c.rounds != 3 || len(c.workloads) < 5 {
		t.Fatalf("--rounds 3 on the suite: %v, %d rounds, %d workloads", err, c.rounds, len(c.workloads))
	}
	if c, err = parseBench([]string{"--scale", "1,2", "--rounds", "1"}, &bytes.Buffer{}); err != nil || c.scale == nil {
		t.Fatalf("--scale with --rounds 1: %v", err)
	}
	c, err = parseBench([]string{"--skew", "zipf:1.1", "--work", "0,1ms,100us"}, &bytes.Buffer{})
	if err != nil || len(c.workloads) != 3 || c.workloads[2].Work != 100*time.Microsecond || c.workloads[0].Zipf != 1.1 {
		t.Fatalf("--work list: %v %+v", err, c.workloads)
	}
}

// TestBound checks the bound with transient failures against a direct
// count: the busiest session's attempts and waits.
func TestBound(t *testing.T) {
	w := workload{Mode: "closed", Sessions: 2, Messages: 4, Work: time.Millisecond, Partitions: 1}
	if b := w.plan().bound; b < 1999 || b > 2001 { // 2 messages × 1 ms per session
		t.Errorf("bound %v, want 2000 msg/s", b)
	}
	w.Transient, w.RetryWait = 0.5, 2*time.Millisecond
	if w.wait(1) != 2*time.Millisecond || w.wait(3) != 8*time.Millisecond || w.wait(100) != 128*time.Millisecond {
		t.Errorf("waits %v %v %v", w.wait(1), w.wait(3), w.wait(100))
	}
	p := w.plan()
	var most time.Duration
	for s := range uint32(2) {
		var d time.Duration
		for seq := range uint32(2) {
			d += w.cost(s, seq)
		}
		most = max(most, d)
	}
	if got, want := p.bound, 4/most.Seconds(); got != want {
		t.Errorf("bound %v, want %v", got, want)
	}
}

// TestPoolDefault: the key-pool baseline gets as many workers as sessions,
// up to 1,000, unless --pool says otherwise.
func TestPoolDefault(t *testing.T) {
	for _, tc := range []struct{ pool, sessions, want int }{{0, 40, 40}, {0, 100_000, 1000}, {8, 100_000, 8}} {
		if got := (benchConfig{pool: tc.pool}).poolFor(workload{Sessions: tc.sessions}); got != tc.want {
			t.Errorf("--pool %d, %d sessions: %d workers, want %d", tc.pool, tc.sessions, got, tc.want)
		}
	}
}

// TestBenchStuckSmall runs the --stuck comparison end to end on the
// embedded broker, small: two rounds of three runs, order and loss checked
// for every message, the stuck sessions parked in the park run and holding their
// partition's commits with in-lane retries. No timing is asserted.
func TestBenchStuckSmall(t *testing.T) {
	longOnly(t, "three stuck-session runs of 2 s, twice")
	rep, out, _ := runJSON[stuckReport](t, "--stuck", "10%:1s", "--sessions", "50", "--rate", "1000",
		"--duration", "2s", "--work", "0", "--partitions", "4", "--rounds", "2")
	if rep.Stuck != 5 || len(rep.Results) != 3 || rep.Rounds != 2 {
		t.Fatalf("%d stuck sessions, %d runs, %d rounds: want 5, 3 and 2\n%s", rep.Stuck, len(rep.Results), rep.Rounds, out)
	}
	for _, r := range rep.Results {
		if r.Violations+r.Overlaps+r.Lost != 0 || r.OthersRate == 0 {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	if inLane, park := rep.Results[1], rep.Results[2]; park.Parked == 0 || inLane.Parked != 0 || inLane.LongestStall == 0 {
		t.Errorf("in-lane retries: %d parked, commits stalled %v; park: %d parked", inLane.Parked, inLane.LongestStall, park.Parked)
	}
}

func TestParseStuck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--stuck", "1%:10s"}, ""},
		{[]string{"--stuck", "0.5:2s", "--duration", "3s"}, ""},
		{[]string{"--stuck", "1%"}, "want PCT:DURATION"},
		{[]string{"--stuck", "0%:1s"}, "want PCT:DURATION"},
		{[]string{"--stuck", "120%:1s"}, "want PCT:DURATION"},
		{[]string{"--stuck", "1%:-1s"}, "want PCT:DURATION"},
		{[]string{"--stuck", "1%:10s", "--duration", "10s"}, "must be longer than the stuck duration"},
		{[]string{"--stuck", "100%:1s", "--sessions", "3"}, "every one of the 3 sessions"},
		{[]string{"--stuck", "1%:1s", "--mode", "closed"}, "--mode: not used with --stuck"},
		{[]string{"--stuck", "1%:1s", "--work", "0,1ms"}, "want one duration"},
		{[]string{"--stuck", "1%:1s", "--rounds", "3"}, ""},
		{[]string{"--stuck", "1%:1s", "--rounds", "0"}, "--rounds 0: need at least 1"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.stuck == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.stuck)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
}

// TestMedianResults: with several rounds a --stuck report shows per mode
// the median of each figure (ratios taken within their round), the
// highest peaks and the summed violations, overlaps and losses.
func TestMedianResults(t *testing.T) {
	ms := time.Millisecond
	round := func(rate, p99Ratio float64, p99 time.Duration, lag int64, lost int) []StuckResult {
		return []StuckResult{{Mode: "no stuck", OthersRate: 100, Ratio: 1, P99: 10 * ms, P99Ratio: 1, Finished: true},
			{Mode: "park", OthersRate: rate, Ratio: rate / 100, P99: p99, P99Ratio: p99Ratio, PeakLag: lag, Lost: lost, Finished: true}}
	}
	got := medianResults([][]StuckResult{round(90, 3, 30*ms, 5, 0), round(100, 1, 10*ms, 9, 1), round(95, 1.2, 12*ms, 7, 0)})
	park := got[1]
	if park.OthersRate != 95 || park.Ratio != 0.95 || park.P99 != 12*ms || park.P99Ratio != 1.2 || park.PeakLag != 9 || park.Lost != 1 ||
		!park.Finished || got[0].Mode != "no stuck" || park.Mode != "park" {
		t.Fatalf("medians %+v", park)
	}
	if even := median([]float64{4, 1, 3, 2}); even != 2.5 {
		t.Fatalf("median of 1..4 = %v, want 2.5", even)
	}
}

// TestBenchScaleSmall grows a group from one member process to two on the
// embedded broker, twice (a preloaded topic, then one sent to): both
// counts settle (every member owning partitions), consume, and report
// latencies. No timing is asserted.
func TestBenchScaleSmall(t *testing.T) {
	longOnly(t, "the scale run of one and two members")
	rep, out, _ := runJSON[scaleReport](t, "--scale", "1,2", "--sessions", "100", "--partitions", "4",
		"--work", "5ms", "--pool", "5", "--duration", "1s")
	if len(rep.Steps) != 2 {
		t.Fatalf("%d steps, want 2\n%s", len(rep.Steps), out)
	}
	for _, s := range rep.Steps {
		if s.Rate <= 0 || s.Settle <= 0 || s.Bound != float64(s.Members)*1000 || s.Offered != 0.8*s.Bound ||
			s.OpenRate <= 0 || s.P50 <= 0 || s.P99 < s.P50 {
			t.Errorf("%d members: %+v", s.Members, s)
		}
	}
}

func TestParseScale(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--scale", "1,2,4,8"}, ""},
		{[]string{"--scale", "1,3", "--pool", "10", "--work", "5ms", "--duration", "2s", "--partitions", "4"}, ""},
		{[]string{"--scale", "2,1"}, "want growing member counts"},
		{[]string{"--scale", "0,1"}, "want growing member counts"},
		{[]string{"--scale", "1,x"}, "want growing member counts"},
		{[]string{"--scale", "1,64"}, "64 members for 48 partitions"},
		{[]string{"--scale", "1,2", "--rate", "10"}, "--rate: not used with --scale"},
		{[]string{"--scale", "1,2", "--work", "0"}, "want one positive duration"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.scale == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.scale)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
}
