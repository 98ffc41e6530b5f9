package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemoSmall runs the demo end to end on the embedded broker; run
// returns an error if any message was lost or handled out of order.
func TestDemoSmall(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo", "--sessions", "40", "--messages", "3000",
		"--permanent", "0.01", "--partitions", "4", "--baseline", "500ms",
		"--paced", "500ms", "--paced-rate", "2000"}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"order violations  0", "lost              0", "dead-lettered", "baseline", "latency, paced"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "produced") && !strings.Contains(out.String(), "throughput") {
		t.Errorf("no progress or report output")
	}
}

// TestDemoDedup runs the demo with the in-memory dedup store: a crash and
// restart redelivers what was handled since the last commit, and no
// effect is applied twice (run fails otherwise).
func TestDemoDedup(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo", "--dedup", "memory", "--sessions", "40", "--messages", "3000",
		"--partitions", "4", "--baseline", "0"}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"crash ", "skipped by the memory store), duplicate effects 0", "lost              0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "(0 skipped") {
		t.Errorf("nothing was delivered twice: the crash tested nothing:\n%s", out.String())
	}
}
