package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsEndCutShort: an End whose Flush outlasts CommitTimeout
// returns (false, DeadlineExceeded) without aborting: franz-go leaves the
// transaction open with its outputs. lanes counts it aborted and rewinds;
// the inputs handled again produce their outputs into the same open
// transaction, which the next End commits: each output twice at
// read_committed.
func TestTransactionsEndCutShort(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 1, 1, nil, "tx-out"); err != nil {
		t.Fatal(err)
	}
	sessions := sessionNames(4)
	const per = 10
	e.produce("tx-in", sessions, per)
	var delayed atomic.Bool
	e.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if req.(*kmsg.ProduceRequest).TransactionID == nil || !delayed.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		e.sleepFor(1500 * time.Millisecond) // a slow broker: longer than CommitTimeout
		return nil, nil, false
	})
	h := echoOutput
	cfg := e.config("g-tx-flush", "tx-in")
	cfg.CommitTimeout = 500 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "every input committed", func() bool {
		offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), "g-tx-flush")
		if err != nil {
			return false
		}
		o, ok := offs.Lookup("tx-in", 0)
		return ok && o.Err == nil && o.At == int64(per*len(sessions))
	}, func() string { return fmt.Sprintf("%+v %q", c.Stats().Transactions, c.Health().Reasons) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%+v", c.Stats().Transactions)
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, nil)
}

// TestTransactionsSecondRevoke: franz-go's GroupTransactSession passes only
// the first revoke of a transaction to lanes' callback (txn.go: "if
// s.revoked { return }"). A partition revoked by a second rebalance
// within one CommitInterval stays owned by lanes (never fenced, drained
// or released), and the abort's rewind takes it up again: two members
// own it.
func TestTransactionsSecondRevoke(t *testing.T) {
	e := newEnv(t, 6, "tx-in", "dlq")
	h := HandlerFunc(func(ctx context.Context, m *Message) error { return nil })
	mk := func(id string, every time.Duration) *Consumer {
		cfg := e.config("g-tx-rev2", "tx-in")
		cfg.CommitInterval = every
		cfg.Transactions = TransactionPolicy{Enabled: true, ID: id}
		c, err := New(cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	owned := func(c *Consumer) map[int32]bool {
		out := map[int32]bool{}
		for _, p := range c.Stats().Partitions {
			out[p.Partition] = true
		}
		return out
	}
	a := mk("rev2-a", 8*time.Second)
	stopA := start(t, a)
	eventually(t, "a owns all", func() bool { return len(owned(a)) == 6 })
	b := mk("rev2-b", 50*time.Millisecond)
	stopB := start(t, b)
	eventually(t, "b owns some", func() bool { return len(owned(b)) > 0 && len(owned(a)) < 6 })
	cc := mk("rev2-c", 50*time.Millisecond)
	stopC := start(t, cc)
	eventually(t, "c owns some", func() bool { return len(owned(cc)) > 0 })
	time.Sleep(500 * time.Millisecond)
	check := func(when string) {
		oa, ob, oc := owned(a), owned(b), owned(cc)
		t.Logf("%s: a %v b %v c %v", when, oa, ob, oc)
		for p := range oa {
			if ob[p] || oc[p] {
				t.Errorf("%s: partition %d owned by a and another member", when, p)
			}
		}
	}
	check("before a's transaction ends")
	time.Sleep(9 * time.Second) // a's transaction ends (aborts: revoked) and rewinds
	check("after a's rewind")
	for _, s := range []func() error{stopC, stopB, stopA} {
		if err := s(); err != nil {
			t.Logf("Run: %v", err)
		}
	}
}

// TestTransactionsLateAfterRevoke: a handler that ignores its context outlasts
// a revoke's drain (a RevokeOverrun) and returns nil after its partition
// was released, once the revoke's transaction aborted and the next began.
// Its partition was released, not rewound, so finish produces its
// outputs into the open transaction, which commits them: the new owner
// produces the same input's outputs again.
func TestTransactionsLateAfterRevoke(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 2, 1, nil, "tx-out"); err != nil {
		t.Fatal(err)
	}
	sessions := sessionNames(8)
	const per = 5
	e.produce("tx-in", sessions, per)
	out := func(m *Message) error {
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
	}
	var slow atomic.Int64
	ha := HandlerFunc(func(ctx context.Context, m *Message) error {
		if _, seq := parseValue(m.Record.Value); seq == 0 && m.Attempt == 1 {
			slow.Add(1)
			time.Sleep(3 * time.Second) // ignores its context
		}
		return out(m)
	})
	hb := HandlerFunc(func(ctx context.Context, m *Message) error { return out(m) })
	cfg := e.config("g-tx-late", "tx-in")
	cfg.RevokeTimeout = 500 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: "late-a"}
	a, err := New(cfg, ha)
	if err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	eventually(t, "a in slow handlers on both partitions", func() bool {
		n := 0
		for _, p := range a.Stats().Partitions {
			if p.InFlight > 0 {
				n++
			}
		}
		return n == 2
	})
	cfg.Transactions.ID = "late-b"
	b, err := New(cfg, hb)
	if err != nil {
		t.Fatal(err)
	}
	stopB := start(t, b)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-late") == int64(per*len(sessions)) }, nil)
	time.Sleep(4 * time.Second) // the late handlers have returned; a's next transactions committed
	if err := stopB(); err != nil {
		t.Logf("Run (b): %v", err)
	}
	if err := stopA(); err != nil {
		t.Logf("Run (a): %v", err)
	}
	t.Logf("a: %+v overruns %d; b: %+v", a.Stats().Transactions, a.Stats().RevokeOverruns, b.Stats().Transactions)
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, nil)
}
