package bench

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestBenchControlSmall runs the --control comparison end to end on the
// embedded broker, small: 20 sessions, one paused and one limited, a
// second of sending. No timing is asserted; the paused session's records
// are not handled until it is resumed, the limited one's keep its rate,
// and once the controls are lifted every message is handled, in order.
func TestBenchControlSmall(t *testing.T) {
	rep, out, errOut := runJSON[controlReport](t, "--control", "10%", "--sessions", "20", "--rate", "400",
		"--duration", "1s", "--work", "0", "--partitions", "2")
	if len(rep.Results) != 2 || rep.Rounds != 1 || rep.Paused != 1 || rep.Limited != 1 || rep.Limit != controlRate {
		t.Fatalf("%d runs, %d rounds, %d paused, %d limited to %g/s\n%s", len(rep.Results), rep.Rounds, rep.Paused, rep.Limited, rep.Limit, out)
	}
	for _, r := range rep.Results {
		if r.Violations+r.Overlaps+r.Lost != 0 || !r.Finished || r.OthersRate <= 0 || r.OthersP99 <= 0 || r.PausedSent != 20 {
			t.Errorf("%s: %+v", r.Arm, r)
		}
	}
	none, ctl := rep.Results[0], rep.Results[1]
	if none.PausedHandled != none.PausedSent || ctl.PausedHandled != 0 {
		t.Errorf("paused sessions' records handled: %d of %d with none controlled, %d controlled (want 0)\n%s",
			none.PausedHandled, none.PausedSent, ctl.PausedHandled, errOut)
	}
	if ctl.LimitedHandled == 0 || ctl.LimitedHandled >= none.LimitedHandled || ctl.LimitedRate > controlRate*limitSlack ||
		ctl.LimitedHandled > 1 && ctl.LimitedMinGap < time.Second/controlRate*9/10 {
		t.Errorf("limited session: %d handled (%d with none controlled), at most %.2f/s, %v apart at least",
			ctl.LimitedHandled, none.LimitedHandled, ctl.LimitedRate, ctl.LimitedMinGap)
	}
	if ctl.Drain <= 0 || none.Drain <= 0 {
		t.Errorf("drains: %v with none controlled, %v controlled", none.Drain, ctl.Drain)
	}
	if ctl.LanesPaused != 1 || none.LanesPaused+none.LanesThrottled != 0 {
		t.Errorf("lanes asleep: %d paused controlled, %d paused and %d throttled with none", ctl.LanesPaused, none.LanesPaused, none.LanesThrottled)
	}
	if !strings.Contains(errOut, "[2/2] controlled") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}

// TestControlPrint: the verdict lines say whether each target holds.
func TestControlPrint(t *testing.T) {
	ms := time.Millisecond
	rep := controlReport{Control: "1%", Sessions: 1000, Paused: 5, Limited: 5, Limit: 2, Burst: 1, Rate: 5000, Duration: 10 * time.Second,
		Work: ms, Partitions: 12, Buffered: 8332, Rounds: 1, Results: []ControlResult{
			{Arm: "none controlled", OthersRate: 4950, OthersRatio: 1, OthersP99: 2 * ms, OthersP99Ratio: 1, PausedHandled: 250, PausedSent: 250, Finished: true},
			{Arm: "controlled", OthersRate: 4851, OthersRatio: 0.98, OthersP99: 3 * ms, OthersP99Ratio: 1.5, PausedSent: 250, LimitedRate: 2, Finished: true},
		}}
	var b strings.Builder
	rep.print(&b)
	for _, s := range []string{"others' throughput 0.98 of the run with none controlled (≥ 0.9: holds)",
		"others' p99 3.0ms, 1.50× the run with none controlled (2.0ms) (≤ 1.3×: does NOT hold)",
		"paused sessions: 0 of their 250 records handled (must be 0: holds)", "at most 2.00 records/s"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
	if b.String() == "" || controlBuffered(workload{Messages: 50_000, Partitions: 12}, controlSpec{}) != 8333 ||
		controlBuffered(workload{Messages: 1000, Partitions: 12}, controlSpec{}) != 4096 ||
		controlBuffered(workload{Messages: 50_000, Partitions: 12}, controlSpec{buffered: 100}) != 100 {
		t.Error("controlBuffered: not a partition's share twice over, at least the default, or --max-buffered")
	}
	if rep.verdict() != nil {
		t.Errorf("verdict %v: the timing targets are not enforced", rep.verdict())
	}
	rep.Results[1].PausedHandled = 1
	if rep.verdict() == nil {
		t.Error("a paused session's record handled, and no error")
	}
}

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--control", "1%"}, ""},
		{[]string{"--control", "5", "--park", "--rounds", "3", "--sessions", "200", "--rate", "2000", "--work", "0"}, ""},
		{[]string{"--control", "x"}, `--control "x": want a share`},
		{[]string{"--control", "0%"}, `--control "0%"`},
		{[]string{"--control", "101%"}, `--control "101%"`},
		{[]string{"--control", "100%"}, "no other session to measure"},
		{[]string{"--control", "1%", "--sessions", "2"}, "no other session to measure"},
		{[]string{"--control", "1%", "--mode", "closed"}, "--mode: not used with --control"},
		{[]string{"--control", "1%", "--stuck", "1%:1s"}, "--stuck: not used with --control"},
		{[]string{"--control", "1%", "--grow", "4:12"}, "--grow: not used with --control"},
		{[]string{"--control", "1%", "--work", "0,1ms"}, "want one duration"},
		{[]string{"--control", "1%", "--unordered"}, "--unordered: not used with --control"},
		{[]string{"--park"}, "--park: used only with --control"},
		{[]string{"--control", "1%", "--max-buffered", "4096"}, ""},
		{[]string{"--control", "1%", "--max-buffered", "-1"}, "--max-buffered -1"},
		{[]string{"--max-buffered", "4096"}, "--max-buffered: used only with --control"},
		{[]string{"--unordered", "--work", "1ms"}, "--work: not used with --unordered"},
		{[]string{"--unordered", "--rate", "100"}, "--rate: not used with --unordered"},
		{[]string{"--unordered", "--sessions", "0"}, "--sessions 0"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.control == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.control)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
	u, err := parseBench([]string{"--unordered"}, io.Discard)
	if err != nil || !u.unordered || len(u.workloads) != 1 || u.workloads[0].Messages != 500_000 || u.workloads[0].Work != 0 ||
		u.workloads[0].Mode != "closed" || len(u.consumers) != 3 {
		t.Errorf("--unordered: %v, %+v", err, u)
	}
	c, err := parseBench([]string{"--control", "1%"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w := c.workloads[0]
	if w.Partitions != 12 || w.Mode != "open" || w.Rate != 5000 || w.Duration != 10*time.Second || w.Work != time.Millisecond ||
		w.Sessions != 1000 || c.control.park || c.control.share != 0.01 {
		t.Errorf("defaults: %+v, %+v", w, *c.control)
	}
	roles := assignRoles(sessionNames(1000), 0.01)
	if roles.count(rolePaused) != 5 || roles.count(roleLimited) != 5 || len(roles) != 1000 {
		t.Errorf("1%% of 1,000: %d paused, %d limited of %d", roles.count(rolePaused), roles.count(roleLimited), len(roles))
	}
	if roles := assignRoles(sessionNames(30), 0.001); roles.count(rolePaused) != 1 || roles.count(roleLimited) != 1 {
		t.Errorf("at least one of each: %d paused, %d limited", roles.count(rolePaused), roles.count(roleLimited))
	}
}

// TestBenchUnorderedSmall runs the --unordered comparison end to end on
// the embedded broker, small: every consumer finishes, raw polling's
// ratio is 1, nothing is handled twice.
func TestBenchUnorderedSmall(t *testing.T) {
	rep, out, errOut := runJSON[unorderedReport](t, "--unordered", "--sessions", "40", "--messages", "3000", "--partitions", "4")
	if len(rep.Results) != 3 || rep.Rounds != 1 || rep.Messages != 3000 {
		t.Fatalf("%d results, %d rounds, %d messages\n%s", len(rep.Results), rep.Rounds, rep.Messages, out)
	}
	for i, r := range rep.Results {
		if r.Consumer != unorderedConsumers[i] || r.Order != orderOf[r.Consumer] || !r.Finished || r.Wall <= 0 || r.OfRaw <= 0 ||
			r.OfLanes <= 0 || r.Violations != 0 {
			t.Errorf("%s: %+v", unorderedConsumers[i], r)
		}
	}
	if raw := rep.Results[0]; raw.OfRaw != 1 || raw.SteadyOfRaw != 1 {
		t.Errorf("raw polling ÷ itself: %v, %v", raw.OfRaw, raw.SteadyOfRaw)
	}
	if !strings.Contains(errOut, "[3/3]  "+consNone) {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}
