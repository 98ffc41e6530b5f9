package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsZombie: claim 4 (docs/exactly-once.md). A member whose
// heartbeats go unanswered is counted gone by the coordinator, and its
// partitions go to the other member, while it still holds an open
// transaction with outputs in it and records it fetched: a zombie. Its
// transaction never commits (its offset commit carries a stale
// generation, or its forced heartbeat is not answered: it aborts), so none
// of its outputs since its last commit is visible, and it rejoins once
// answered. Every input's outputs are read at read_committed exactly once,
// in session order. Under both group protocols (KIP-848 in the quick form).
func TestTransactionsZombie(t *testing.T) {
	for _, proto := range protocolsFor(t, "kip848") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnv(t, 4)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 2, 1, nil, "tx-out"); err != nil {
				t.Fatal(err)
			}
			hb := e.heartbeatGate()
			sessions := sessionNames(12)
			h := HandlerFunc(func(ctx context.Context, m *Message) error {
				select { // work that honours its context
				case <-time.After(2 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
			})
			group := "g-tx-zombie-" + proto.name
			cfg := e.groupConfig(group, proto.opts)
			cfg.CommitInterval = 100 * time.Millisecond
			cfg.Transactions = TransactionPolicy{Enabled: true, ID: group + "-a"}
			a, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			rounds := e.streamRounds(sessions, 5*time.Millisecond)
			stopA := start(t, a)
			eventually(t, "a to commit a transaction", func() bool { return a.Stats().Transactions.Committed > 0 })
			var id string
			eventually(t, "a heartbeat of a, alone in the group", func() bool {
				id = strings.Join(hb.seen(), "")
				return id != ""
			})
			cfg.Transactions.ID = group + "-b"
			b, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			stopB := start(t, b)
			eventually(t, "both members to own partitions", func() bool {
				return len(a.Stats().Partitions) > 0 && len(b.Stats().Partitions) > 0
			})
			abortedBefore := a.Stats().Transactions.Aborted
			hb.mute(func(m string) bool { return m == id })
			eventually(t, "b to own every partition", func() bool { return len(b.Stats().Partitions) == 4 })
			before := a.Stats().Rebalances
			hb.unmute()
			eventually(t, "a to rejoin", func() bool {
				st := a.Stats()
				return st.Rebalances > before && len(st.Partitions) > 0
			})
			n := rounds()
			waitFor(t, "every input committed", func() bool { return committedSum(e, group) == int64(n*len(sessions)) }, nil)
			if err := stopA(); err != nil {
				t.Logf("a: Run: %v", err)
			}
			if err := stopB(); err != nil {
				t.Logf("b: Run: %v", err)
			}
			sa := a.Stats().Transactions
			t.Logf("%d rounds of %d sessions; a: %+v; b: %+v", n, len(sessions), sa, b.Stats().Transactions)
			if sa.Aborted == abortedBefore {
				t.Errorf("the zombie's transaction did not abort: %+v", sa)
			}
			out := readOutputs(t, e, "tx-out", true)
			checkOutputs(t, out, sessions, n, 1, nil)
			if t.Failed() {
				t.Logf("outputs of %s: %.200v", sessions[0], out.order[sessions[0]])
			}
		})
	}
}
