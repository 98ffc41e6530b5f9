package bench

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/lanestest"
)

// TestBenchTransactionsSmall runs the --transactions comparison end to
// end on the embedded broker, small: 20 sessions, a second of sending,
// the transactional mode at 100 ms. No timing is asserted; every message
// is handled in order, its output read once at read_committed in both
// runs, and the transactional run commits transactions and says so.
func TestBenchTransactionsSmall(t *testing.T) {
	rep, out, errOut := runJSON[txReport](t, "--transactions", "100ms", "--sessions", "20", "--rate", "400",
		"--duration", "1s", "--work", "0", "--partitions", "2")
	if len(rep.Results) != 2 || rep.Rounds != 1 || rep.Transactions != "100ms" {
		t.Fatalf("%d runs, %d rounds, --transactions %q\n%s", len(rep.Results), rep.Rounds, rep.Transactions, out)
	}
	for _, r := range rep.Results {
		if r.Violations+r.Overlaps+r.Lost+r.Missing+r.OutOfOrder+r.VisibleTwice != 0 || !r.Finished || r.OutputErr != "" ||
			r.Rate <= 0 || r.P99 <= 0 || r.HandledP99 <= 0 || r.Visible != 400 {
			t.Errorf("%s: %+v", r.Run, r)
		}
	}
	base, tx := rep.Results[0], rep.Results[1]
	if base.Run != "no transactions" || base.Every != 0 || base.Committed != 0 || base.Outputs != 0 || base.Ratio != 1 {
		t.Errorf("the run without transactions: %+v", base)
	}
	if tx.Run != "transactions every 100ms" || tx.Every != 100*time.Millisecond || tx.Committed < 5 || tx.Outputs < 400 ||
		tx.MeanEnd <= 0 || tx.Ratio <= 0 || tx.P99Ratio <= 0 {
		t.Errorf("the transactional run: %+v", tx)
	}
	if !strings.Contains(errOut, "[2/2] transactions every 100ms") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}

// TestTransactionsPrint: the verdict lines hold the 100 ms run to the
// target and only report the others; redeliveries pass, a missing output,
// an output read twice in a transactional run or a bad output topic fail
// the run.
func TestTransactionsPrint(t *testing.T) {
	ms := time.Millisecond
	rep := txReport{Transactions: "10ms,100ms", Sessions: 1000, Rate: 5000, Duration: 10 * time.Second, Work: ms, Partitions: 12,
		Rounds: 2, Results: []TxResult{
			{Run: "no transactions", Rate: 4990, Ratio: 1, P99: 5 * ms, P99Ratio: 1, Finished: true},
			{Run: "transactions every 10ms", Every: 10 * ms, Rate: 3000, Ratio: 0.6, P99: 50 * ms, P99Ratio: 10, Committed: 900,
				MeanEnd: 8 * ms, Outputs: 50_000, Finished: true},
			{Run: "transactions every 100ms", Every: 100 * ms, Rate: 4950, Ratio: 0.99, P99: 150 * ms, P99Ratio: 30, Committed: 100,
				MeanEnd: 9 * ms, Outputs: 50_100, Aborted: 1, Rewinds: 1, Redelivered: 100, Regressions: 3, Finished: true},
		}}
	rep.PerRound = [][]TxResult{rep.Results, rep.Results}
	var b strings.Builder
	rep.print(&b)
	for _, s := range []string{"medians of 2 rounds", "read_committed",
		"transactions every 100ms: throughput 0.99 of the run without transactions (≥ 0.80: holds)",
		"transactions every 10ms: throughput 0.60 of the run without transactions (the target is at 100ms: reported, no target)",
		"transactions every 100ms: p99 150.0ms end to end, 30.00× the run without transactions (5.0ms) (reported, no target)",
		"transactions every 10ms, round by round: throughput 0.60, 0.60, p99 10.00, 10.00",
		"every input's output read at read_committed, and once in the transactional runs (always: holds)", "8.0ms"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
	if err := rep.verdict(); err != nil {
		t.Errorf("verdict %v: redeliveries and the throughput target are not enforced", err)
	}
	rep.Results[0].VisibleTwice = 2 // at least once: allowed without transactions
	if err := rep.verdict(); err != nil {
		t.Errorf("an output read twice without transactions: verdict %v", err)
	}
	for _, bad := range []func(r *TxResult){
		func(r *TxResult) { r.Missing = 1 },
		func(r *TxResult) { r.VisibleTwice = 1 },
		func(r *TxResult) { r.OutputErr = "1 keys with outputs out of input order" },
		func(r *TxResult) { r.OutOfOrder = 1 },
		func(r *TxResult) { r.Lost = 1 },
	} {
		x := rep
		x.Results = append([]TxResult(nil), rep.Results...)
		bad(&x.Results[2])
		if err := x.verdict(); err == nil || !strings.Contains(err.Error(), "transactions every 100ms") {
			t.Errorf("%+v: verdict %v", x.Results[2], err)
		}
	}
}

// TestMedianTx: per run, the medians of the rounds, ratios taken within
// each round; aborts and failed checks summed.
func TestMedianTx(t *testing.T) {
	ms := time.Millisecond
	round := func(rate float64, end time.Duration, aborted int64) []TxResult {
		base := TxResult{Run: "no transactions", Rate: 100, P99: 10 * ms, HandledP99: 2 * ms, Finished: true}
		x := TxResult{Run: "transactions every 100ms", Every: 100 * ms, Rate: rate, P99: 100 * ms, HandledP99: 2 * ms,
			Committed: 100 - aborted, Aborted: aborted, MeanEnd: end, Finished: true}
		x.within(base)
		return []TxResult{base, x}
	}
	got := medianTx([][]TxResult{round(97, ms, 0), round(99, 3*ms, 1), round(100, 2*ms, 2)})[1]
	if got.Ratio != 0.99 || got.MeanEnd != 2*ms || got.Aborted != 3 || got.Committed != 99 || got.P99Ratio != 10 ||
		got.HandledP99Ratio != 1 || got.Every != 100*ms || !got.Finished {
		t.Fatalf("medians %+v", got)
	}
}

// TestTxCheckOutputs: ReadOutputs' verdict and its count of inputs reach
// the result.
func TestTxCheckOutputs(t *testing.T) {
	r := TxResult{Finished: true}
	r.checkOutputs(lanestest.OutputReport{Inputs: map[string]int{"t/0@0": 1}}, 2)
	if r.Missing != 1 || r.Finished || r.OutputErr != "" {
		t.Errorf("one input of two: %+v", r)
	}
	r = TxResult{Finished: true}
	r.checkOutputs(lanestest.OutputReport{Inputs: map[string]int{"t/0@0": 2}, Duplicated: []string{"t/0@0"}}, 1)
	if r.Missing != 0 || !strings.Contains(r.OutputErr, "read twice") {
		t.Errorf("a duplicate: %+v", r)
	}
	r = TxResult{Finished: true}
	r.checkOutputs(lanestest.OutputReport{Inputs: map[string]int{"t/0@0": 1}, Unmarked: 1}, 1)
	if !strings.Contains(r.OutputErr, "without lanes' output headers") {
		t.Errorf("unmarked: %+v", r)
	}
}

func TestParseTransactions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // "" when valid
	}{
		{[]string{"--transactions", "100ms"}, ""},
		{[]string{"--transactions", "10ms,100ms,1s", "--rounds", "3", "--sessions", "200", "--rate", "2000", "--work", "0"}, ""},
		{[]string{"--transactions", "x"}, `--transactions "x": want commit intervals`},
		{[]string{"--transactions", "0s"}, `--transactions "0s"`},
		{[]string{"--transactions", "-1s"}, `--transactions "-1s"`},
		{[]string{"--transactions", "100ms,100ms"}, "100ms twice"},
		{[]string{"--transactions", "100ms,0.1s"}, "100ms twice"},
		{[]string{"--transactions", "1s", "--status-page", "1s"}, "--status-page: not used with --transactions"},
		{[]string{"--transactions", "1s", "--control", "1%"}, "--control: not used with --transactions"},
		{[]string{"--transactions", "1s", "--unordered"}, "--unordered: not used with --transactions"},
		{[]string{"--transactions", "1s", "--grow", "4:12"}, "--grow: not used with --transactions"},
		{[]string{"--transactions", "1s", "--stuck", "1%:1s"}, "--stuck: not used with --transactions"},
		{[]string{"--transactions", "1s", "--scale", "1,2"}, "--scale: not used with --transactions"},
		{[]string{"--transactions", "1s", "--mode", "closed"}, "--mode: not used with --transactions"},
		{[]string{"--transactions", "1s", "--consumers", "lanes"}, "--consumers: not used with --transactions"},
		{[]string{"--transactions", "1s", "--work", "0,1ms"}, "with --transactions, want one duration"},
		{[]string{"--transactions", "1s", "--rate", "0"}, "--rate 0"},
	} {
		c, err := parseBench(tc.args, io.Discard)
		switch {
		case tc.bad == "" && (err != nil || c.transactions == nil || len(c.workloads) != 1):
			t.Errorf("%v: %v, %+v", tc.args, err, c.transactions)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.bad)
		}
	}
	c, err := parseBench([]string{"--transactions", "10ms,100ms,1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.workloads[0]; w.Partitions != 12 || w.Mode != "open" || w.Rate != 5000 || w.Duration != 10*time.Second ||
		w.Work != time.Millisecond || w.Sessions != 1000 || len(c.transactions.every) != 3 || c.transactions.every[2] != time.Second {
		t.Errorf("defaults: %+v, %v", w, c.transactions.every)
	}
}
