package bench

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestBenchStatusPageSmall runs the --status-page comparison end to end
// on the embedded broker, small: 20 sessions, a second of sending, the
// page loaded every 200 ms in the second run. No timing is asserted; the
// page loads, and every message is handled once, in order, in both runs.
func TestBenchStatusPageSmall(t *testing.T) {
	rep, out, errOut := runJSON[statusPageReport](t, "--status-page", "200ms", "--sessions", "20", "--rate", "400",
		"--duration", "1s", "--work", "0", "--partitions", "2")
	if len(rep.Results) != 2 || rep.Rounds != 1 || rep.StatusPage != "200ms" {
		t.Fatalf("%d runs, %d rounds, --status-page %q\n%s", len(rep.Results), rep.Rounds, rep.StatusPage, out)
	}
	for _, r := range rep.Results {
		if r.Violations+r.Overlaps+r.Duplicates+r.Lost != 0 || !r.Finished || r.Rate <= 0 || r.P99 <= 0 || r.Failed != 0 {
			t.Errorf("%s: %+v", r.Run, r)
		}
	}
	none, page := rep.Results[0], rep.Results[1]
	if none.Run != "no page" || none.Loads != 0 || none.Every != 0 || none.Ratio != 1 {
		t.Errorf("the run with no page: %+v", none)
	}
	if page.Run != "page every 200ms" || page.Every != 200*time.Millisecond || page.Loads < 3 || page.Loads > 5 ||
		page.MeanLoad <= 0 || page.SlowestLoad < page.MeanLoad || page.PageBytes < 1000 || page.Busy <= 0 || page.Ratio <= 0 {
		t.Errorf("the run with the page: %+v", page)
	}
	if !strings.Contains(errOut, "[2/2] page every 200ms") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}

// TestStatusPagePrint: the verdict lines hold the once-a-second run to
// the target and only report a harsher one; a failed load fails the run.
func TestStatusPagePrint(t *testing.T) {
	ms := time.Millisecond
	rep := statusPageReport{StatusPage: "1s,100ms", Sessions: 1000, Rate: 5000, Duration: 10 * time.Second, Work: ms, Partitions: 12,
		Rounds: 3, Results: []StatusPageResult{
			{Run: "no page", Rate: 4950, Ratio: 1, P99: 2 * ms, P99Ratio: 1, Finished: true},
			{Run: "page every 1s", Every: time.Second, Rate: 4900, Ratio: 0.99, P99: 3 * ms, P99Ratio: 1.5, Loads: 10,
				MeanLoad: 2 * ms, SlowestLoad: 4 * ms, PageBytes: 12_345, Busy: 0.002, Finished: true},
			{Run: "page every 100ms", Every: 100 * ms, Rate: 4800, Ratio: 0.97, P99: 4 * ms, P99Ratio: 2, Loads: 100,
				MeanLoad: 2 * ms, SlowestLoad: 5 * ms, PageBytes: 12_345, Busy: 0.02, Finished: true},
		}}
	var b strings.Builder
	rep.print(&b)
	for _, s := range []string{"medians of 3 rounds",
		"page every 1s: throughput 0.99 of the run with no page (≥ 0.98: holds)",
		"page every 1s: p99 3.0ms, 1.50× the run with no page (2.0ms) (reported, no target)",
		"page every 100ms: throughput 0.97 of the run with no page (loaded more often than the target's every 1s: reported, no target)",
		"every page load answered 200 with the whole page (always: holds)", "12.3 kB", "2.00%"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
	if err := rep.verdict(); err != nil {
		t.Errorf("verdict %v: the throughput target is not enforced", err)
	}
	rep.Results[1].Failed, rep.Results[1].FirstFailure = 1, "GET status: 500 Internal Server Error"
	if err := rep.verdict(); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a failed load: verdict %v", err)
	}
}

// TestMedianStatusPage: per run, the medians of the rounds, ratios taken
// within each round; the slowest load the slowest; losses summed.
func TestMedianStatusPage(t *testing.T) {
	ms := time.Millisecond
	round := func(rate float64, mean time.Duration, lost int) []StatusPageResult {
		none := StatusPageResult{Run: "no page", Rate: 100, P99: 10 * ms, Finished: true}
		p := StatusPageResult{Run: "page every 1s", Every: time.Second, Rate: rate, P99: 10 * ms, Loads: 10, MeanLoad: mean,
			SlowestLoad: 2 * mean, Lost: lost, Finished: lost == 0}
		p.within(none)
		return []StatusPageResult{none, p}
	}
	got := medianStatusPage([][]StatusPageResult{round(97, ms, 0), round(99, 3*ms, 1), round(100, 2*ms, 0)})[1]
	if got.Ratio != 0.99 || got.MeanLoad != 2*ms || got.SlowestLoad != 6*ms || got.Lost != 1 || got.Finished || got.P99Ratio != 1 ||
		got.Every != time.Second {
		t.Fatalf("medians %+v", got)
	}
}

func TestParseStatusPage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--status-page", "1s"}, ""},
		{[]string{"--status-page", "1s,100ms", "--rounds", "3", "--sessions", "200", "--rate", "2000", "--work", "0"}, ""},
		{[]string{"--status-page", "x"}, `--status-page "x": want how often`},
		{[]string{"--status-page", "0s"}, `--status-page "0s"`},
		{[]string{"--status-page", "1s,1s"}, "1s twice"},
		{[]string{"--status-page", "1s", "--control", "1%"}, "--control: not used with --status-page"},
		{[]string{"--status-page", "1s", "--unordered"}, "--unordered: not used with --status-page"},
		{[]string{"--status-page", "1s", "--grow", "4:12"}, "--grow: not used with --status-page"},
		{[]string{"--status-page", "1s", "--mode", "closed"}, "--mode: not used with --status-page"},
		{[]string{"--status-page", "1s", "--park"}, "--park: not used with --status-page"},
		{[]string{"--status-page", "1s", "--work", "0,1ms"}, "with --status-page, want one duration"},
		{[]string{"--status-page", "1s", "--rate", "0"}, "--rate 0"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.statusPage == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.statusPage)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
	c, err := parseBench([]string{"--status-page", "1s,100ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.workloads[0]; w.Partitions != 12 || w.Mode != "open" || w.Rate != 5000 || w.Duration != 10*time.Second ||
		w.Work != time.Millisecond || w.Sessions != 1000 || len(c.statusPage.every) != 2 || c.statusPage.every[1] != 100*time.Millisecond {
		t.Errorf("defaults: %+v, %v", w, c.statusPage.every)
	}
}
