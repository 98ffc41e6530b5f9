package bench

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

// TestBenchGrowSmall runs the --grow comparison end to end on the
// embedded broker, small: a topic of 2 partitions grown to 4 halfway
// through a second of sending, against one never grown; order and loss
// checked for every message. No timing is asserted.
func TestBenchGrowSmall(t *testing.T) {
	rep, out, errOut := runJSON[growReport](t, "--grow", "2:4", "--sessions", "40", "--rate", "400",
		"--duration", "1s", "--work", "0")
	if len(rep.Results) != 2 || rep.Rounds != 1 || rep.Moved == 0 || rep.Moved >= rep.Sessions || rep.Checked < rep.Moved {
		t.Fatalf("%d runs, %d rounds, %d of %d sessions moved, %d checked\n%s", len(rep.Results), rep.Rounds, rep.Moved, rep.Sessions, rep.Checked, out)
	}
	for _, r := range rep.Results {
		if r.Violations+r.Overlaps+r.Lost != 0 || !r.Finished || r.OthersRate <= 0 || r.MovedP99 <= 0 {
			t.Errorf("%s: %+v", r.Arm, r)
		}
	}
	none, grown := rep.Results[0], rep.Results[1]
	if none.MovedReleased != 0 || grown.MovedReleased == 0 || grown.Learned < 0 {
		t.Errorf("waits released: %d without growth, %d with; the producer learned the count after %v\n%s",
			none.MovedReleased, grown.MovedReleased, grown.Learned, errOut)
	}
	if !strings.Contains(errOut, "[2/2] growth") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}

func TestParseGrow(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--grow", "4:12"}, ""},
		{[]string{"--grow", "4:12", "--partitioning", "jump", "--rounds", "3", "--sessions", "200", "--rate", "2000", "--work", "0"}, ""},
		{[]string{"--grow", "x"}, `--grow "x": want FROM:TO`},
		{[]string{"--grow", "4"}, `--grow "4": want FROM:TO`},
		{[]string{"--grow", "4:x"}, `--grow "4:x": want FROM:TO`},
		{[]string{"--grow", "12:4"}, "--grow 12:4: TO must be more than FROM"},
		{[]string{"--grow", "4:4"}, "--grow 4:4: TO must be more than FROM"},
		{[]string{"--grow", "0:4"}, "--grow 0:4: FROM 0: a topic has at least 1 partition"},
		{[]string{"--grow", "-1:4"}, "FROM -1"},
		{[]string{"--grow", "4:12", "--partitioning", "murmur"}, `--partitioning "murmur": want kafka or jump`},
		{[]string{"--partitioning", "jump"}, "--partitioning: used only with --grow"},
		{[]string{"--grow", "4:12", "--partitions", "8"}, "--partitions: not used with --grow"},
		{[]string{"--grow", "4:12", "--mode", "closed"}, "--mode: not used with --grow"},
		{[]string{"--grow", "4:12", "--consumers", "lanes"}, "--consumers: not used with --grow"},
		{[]string{"--grow", "4:12", "--stuck", "1%:1s"}, "--stuck: not used with --grow"},
		{[]string{"--grow", "4:12", "--scale", "1,2"}, "--scale: not used with --grow"},
		{[]string{"--grow", "4:12", "--work", "0,1ms"}, "want one duration"},
		{[]string{"--grow", "4:12", "--rate", "0"}, "--rate 0"},
		{[]string{"--grow", "4:12", "--rounds", "0"}, "--rounds 0: need at least 1"},
		{[]string{"--grow", "1:2", "--sessions", "1"}, "raise --sessions"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.grow == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.grow)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
	c, err := parseBench([]string{"--grow", "4:12"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.workloads[0]; w.Partitions != 4 || w.Mode != "open" || w.Rate != 5000 || w.Duration != 10*time.Second ||
		w.Work != time.Millisecond || w.Sessions != 1000 || c.grow.scheme != hashring.SchemeKafka {
		t.Errorf("defaults: %+v, scheme %v", w, c.grow.scheme)
	}
}

// TestClassify: a session is moved when FROM and TO place it apart,
// checked when they agree but a count between does not (Kafka's
// partitioner only: jump hashing moves a key only to a new partition).
func TestClassify(t *testing.T) {
	names := sessionNames(500)
	for _, scheme := range []hashring.Scheme{hashring.SchemeKafka, hashring.SchemeJump} {
		g := growSpec{from: 4, to: 12, scheme: scheme}
		cls := classify(names, g)
		pl := hashring.Placement{Scheme: scheme}
		for _, n := range names {
			a, _ := pl.Partition([]byte(n), 4)
			b, _ := pl.Partition([]byte(n), 12)
			if (a != b) != (cls[n] == classMoved) {
				t.Fatalf("%v %s: %d → %d, class %d", scheme, n, a, b, cls[n])
			}
		}
		moved, checked := cls.count(classMoved), cls.count(classChecked)
		if moved == 0 || scheme == hashring.SchemeJump && checked != 0 || scheme == hashring.SchemeKafka && checked == 0 {
			t.Errorf("%v: %d moved, %d checked", scheme, moved, checked)
		}
	}
}

// TestMedianGrow: the rounds' figures per arm are medians, ratios and
// extras taken within each round; violations and losses summed.
func TestMedianGrow(t *testing.T) {
	ms := time.Millisecond
	round := func(rate float64, p99 time.Duration, lost int) []GrowResult {
		none := GrowResult{Arm: "no growth", OthersRate: 100, MovedP99: 10 * ms, Finished: true}
		g := GrowResult{Arm: "growth", OthersRate: rate, MovedP99: p99, Lost: lost, Finished: true}
		g.within(none)
		return []GrowResult{none, g}
	}
	got := medianGrow([][]GrowResult{round(90, 30*ms, 0), round(100, 10*ms, 1), round(95, 2000*ms, 0)})
	g := got[1]
	if g.OthersRatio != 0.95 || g.MovedP99 != 30*ms || g.MovedP99Extra != 20*ms || g.MovedP99Ratio != 3 || g.Lost != 1 || g.Arm != "growth" {
		t.Fatalf("medians %+v", g)
	}
	if signed(-2*ms) != "−2.0ms" || signed(0) != "0" || signed(ms) != "+1.0ms" {
		t.Errorf("signed: %q %q %q", signed(-2*ms), signed(0), signed(ms))
	}
}
