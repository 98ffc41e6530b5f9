package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fencedWorld runs a transactional member (ID "<group>-member") on tx-in,
// each input's output to tx-out, until its first transaction committed,
// then fences it: an intruder takes its transactional ID. Until gate is
// closed, the broker refuses a producer for any other transactional ID of
// the member's (what it joins again under), so the test sees the member
// out, waiting to join again.
type fencedWorld struct {
	e        *env
	c        *Consumer
	errc     chan error
	cancel   context.CancelFunc
	stopOnce sync.Once
	runErr   error
	sessions []string
	gate     chan struct{}
	refused  atomic.Int64 // producers refused while gated
}

const fencedPer = 20

// stop cancels the member's Run and returns its error, once.
func (w *fencedWorld) stop(t *testing.T) error {
	w.stopOnce.Do(func() {
		w.cancel()
		select {
		case w.runErr = <-w.errc:
		case <-time.After(testTimeout):
			t.Fatal("Run did not return")
		}
	})
	return w.runErr
}

func newFencedWorld(t *testing.T, group string) *fencedWorld {
	w := &fencedWorld{e: newEnv(t, 2, "tx-in", "dlq", "tx-out"), sessions: sessionNames(4), gate: make(chan struct{}), errc: make(chan error, 1)}
	w.e.produce("tx-in", w.sessions[:2], fencedPer)
	h := echoOutput
	cfg := w.e.config(group, "tx-in")
	id := group + "-member"
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: id}
	var err error
	if w.c, err = New(cfg, h); err != nil {
		t.Fatal(err)
	}
	w.e.c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		w.e.c.KeepControl()
		req := kr.(*kmsg.InitProducerIDRequest)
		select {
		case <-w.gate:
			return nil, nil, false
		default:
		}
		if req.TransactionalID == nil || !strings.HasPrefix(*req.TransactionalID, id+"-r") {
			return nil, nil, false
		}
		w.refused.Add(1)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil, true
	})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.errc <- w.c.Run(ctx) }()
	t.Cleanup(func() { _ = w.stop(t) })
	waitFor(t, "the first transaction", func() bool { return w.c.Stats().Transactions.Committed > 0 }, nil)

	in := w.e.client(kgo.TransactionalID(id)) // the intruder
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
	w.e.produce("tx-in", w.sessions[2:], fencedPer) // work the fenced member must still do
	waitFor(t, "the member out, waiting to join again", func() bool {
		return w.refused.Load() > 0 && strings.Contains(strings.Join(w.c.Health().Reasons, "\n"), "left its group")
	}, func() string { return fmt.Sprintf("%+v; %q", w.c.Stats().Transactions, w.c.Health().Reasons) })
	return w
}

// TestTransactionsFenced: another process takes the member's
// transactional ID (its producer is fenced). The member is not left
// dead: it leaves its group (Health says so, and under which ID it joins
// again), joins again as a new member under a new transactional ID,
// handles everything, and every input's outputs are read once, in order.
func TestTransactionsFenced(t *testing.T) {
	w := newFencedWorld(t, "g-tx-fenced")
	if n := w.c.Stats().Transactions.Rejoins; n != 0 {
		t.Fatalf("Rejoins = %d while the member waits to join again", n)
	}
	close(w.gate)
	e := w.e
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-fenced") == int64(fencedPer*len(w.sessions)) },
		func() string { return fmt.Sprintf("%+v; %q", w.c.Stats().Transactions, w.c.Health().Reasons) })
	if n := w.c.Stats().Transactions.Rejoins; n != 1 {
		t.Errorf("Rejoins = %d, want 1", n)
	}
	for _, r := range w.c.Health().Reasons {
		if strings.HasPrefix(r, "transactions:") {
			t.Errorf("a transactions reason left after the member joined again: %s", r)
		}
	}
	if err := w.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), w.sessions, fencedPer, 1, nil)
}

// TestTransactionsFencedShutdown: the shutdown comes while a fenced
// member waits to join again: Run returns at once with an error wrapping
// ErrFenced, and what it did not handle is left for the group (nothing
// of it committed twice).
func TestTransactionsFencedShutdown(t *testing.T) {
	w := newFencedWorld(t, "g-tx-fenced-stop")
	err := w.stop(t)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Run: %v, want ErrFenced", err)
	}
	t.Logf("Run: %v", err)
	if n := committedSum(w.e, "g-tx-fenced-stop"); n > int64(fencedPer*2) {
		t.Errorf("committed %d inputs, at most the %d of the first sessions could be", n, fencedPer*2)
	}
}
