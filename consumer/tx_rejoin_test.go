package consumer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fence takes id, a member's transactional ID, with an intruder's
// producer and a transaction of its own.
func fence(t *testing.T, e *env, id string) {
	t.Helper()
	in := e.client(kgo.TransactionalID(id))
	defer in.Close()
	if err := in.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := in.ProduceSync(ctx, &kgo.Record{Topic: "tx-out", Value: []byte("intruder")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := in.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// groupEmpty fails t unless group has no member.
func groupEmpty(t *testing.T, e *env, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	gs, err := kadm.NewClient(e.client()).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if g := gs[group]; len(g.Members) > 0 {
		t.Errorf("after Run returned, group %s (state %s) still has %d members: the member did not leave", group, g.State, len(g.Members))
	}
}

// TestTransactionsFencedShutdownDuringDrain: the shutdown comes as a
// fenced member starts to leave (a handler still running, its partitions
// draining): the member still leaves its group before Run returns (found
// by review: the leave used the cancelled context and was never sent).
func TestTransactionsFencedShutdownDuringDrain(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq", "tx-out")
	const group = "g-tx-fenced-drain"
	sessions := sessionNames(4)
	e.produce("tx-in", sessions, 5)
	var blocked atomic.Bool
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "block|0" {
			blocked.Store(true)
			<-ctx.Done()
			return ctx.Err()
		}
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
	})
	cfg := e.config(group, "tx-in")
	cfg.ShutdownTimeout, cfg.RevokeTimeout = time.Second, 2*time.Second
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: group + "-member"}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "the first transaction", func() bool { return c.Stats().Transactions.Committed > 0 })
	e.produce("tx-in", []string{"block"}, 1)
	eventually(t, "a handler that runs until cancelled", blocked.Load)
	fence(t, e, cfg.Transactions.ID)
	e.produce("tx-in", sessions, 5) // work that meets the fence
	eventually(t, "the fenced transaction aborted", func() bool { return c.Stats().Transactions.Aborted > 0 })
	_ = stop()
	groupEmpty(t, e, group)
}

// TestTransactionsFencedShutdownWhileOpening: the shutdown comes while the
// rejoining member's new producer waits for the broker (InitProducerID
// held): Run returns without waiting for it (found by review: it waited
// for franz-go's retries, 33 s), and the member is out of its group.
func TestTransactionsFencedShutdownWhileOpening(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq", "tx-out")
	const group = "g-tx-fenced-opening"
	id := group + "-member"
	release := make(chan struct{})
	defer close(release)
	var asked atomic.Bool
	e.c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || !strings.HasPrefix(*req.TransactionalID, id+"-r") {
			return nil, nil, false
		}
		asked.Store(true)
		e.sleep(release)
		return nil, nil, false
	})
	e.produce("tx-in", sessionNames(4), 5)
	cfg := e.config(group, "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: id}
	c, err := New(cfg, HandlerFunc(func(ctx context.Context, m *Message) error {
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: m.Record.Value})
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c) // fails the test if Run does not return (the InitProducerID stays held until the test ends)
	eventually(t, "the first transaction", func() bool { return c.Stats().Transactions.Committed > 0 })
	fence(t, e, id)
	e.produce("tx-in", sessionNames(4), 5)
	eventually(t, "the new producer asked for", asked.Load)
	_ = stop()
	groupEmpty(t, e, group)
}

// TestTransactionsRejoinJoinsOnceBegun: a rejoining member whose new
// producer cannot begin (its ID refused) does not join its group with
// that client: each try would rebalance the others for nothing (found by
// review: two JoinGroups while it was out).
func TestTransactionsRejoinJoinsOnceBegun(t *testing.T) {
	w := newFencedWorld(t, "g-tx-rejoin-join")
	var joins atomic.Int64
	w.e.c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		w.e.c.KeepControl()
		joins.Add(1)
		return nil, nil, false
	})
	refused := w.refused.Load()
	eventually(t, "two more refused producers", func() bool { return w.refused.Load() >= refused+2 })
	if n := joins.Load(); n != 0 {
		t.Errorf("%d JoinGroup requests while the member was out, its new producers refused: want 0", n)
	}
	close(w.gate)
	eventually(t, "the member joined again", func() bool { return w.c.Stats().Transactions.Rejoins == 1 })
	eventually(t, "a JoinGroup", func() bool { return joins.Load() > 0 })
}
