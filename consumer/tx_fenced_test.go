package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsFenced: another process takes the member's
// transactional ID (its producer is fenced). The member does not go on
// failing in place: it leaves its group and Run returns ErrFenced, so a
// supervisor starts it again; a member started again (a new Consumer)
// handles everything, and every input's outputs are read once, in order.
func TestTransactionsFenced(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq", "tx-out")
	sessions := sessionNames(4)
	const per = 20
	e.produce("tx-in", sessions[:2], per)
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
	})
	cfg := e.config("g-tx-fenced", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: "g-tx-fenced-member"}
	a, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	waitFor(t, "a's first transaction", func() bool { return a.Stats().Transactions.Committed > 0 }, nil)

	// The intruder: the same transactional ID, a transaction of its own.
	in := e.client(kgo.TransactionalID(cfg.Transactions.ID))
	if err := in.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), testTimeout)
	defer pcancel()
	if err := in.ProduceSync(pctx, &kgo.Record{Topic: "tx-out", Value: []byte("intruder")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := in.EndTransaction(pctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	in.Close()
	e.produce("tx-in", sessions[2:], per) // work for the fenced member

	select {
	case err := <-errc:
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Run: %v, want ErrFenced", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(testTimeout):
		t.Fatalf("Run did not return after its producer was fenced: %+v; %q", a.Stats().Transactions, a.Health().Reasons)
	}

	cfg.Transactions.ID = "g-tx-fenced-member-2"
	b, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, b)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-fenced") == int64(per*len(sessions)) },
		func() string { return fmt.Sprintf("%+v", b.Stats().Transactions) })
	if err := stop(); err != nil {
		t.Errorf("b: Run: %v", err)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, nil)
}
