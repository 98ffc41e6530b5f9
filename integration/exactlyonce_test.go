package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// outputsPer is how many outputs the exactly-once scenarios' handler
// gives each input.
const outputsPer = 2

// txHandler is the exactly-once scenarios' handler: it gives each input
// outputsPer outputs to out, keyed by its session, then runs f's faults
// (a failed attempt's outputs are dropped).
func txHandler(out string, f faults) consumer.Handler {
	inner := faulty(f)
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		for k := range outputsPer {
			r := &kgo.Record{Topic: out, Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|" + strconv.Itoa(k))}
			if err := m.Output(r); err != nil {
				return consumer.Permanent(err)
			}
		}
		return inner.Handle(ctx, m)
	})
}

// txConfig is consumerConfig in the transactional mode, with the member's
// own transactional ID.
func (c *cluster) txConfig(group, topic, dlq, member string) consumer.Config {
	cfg := c.consumerConfig(group, topic, dlq)
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.Transactions = consumer.TransactionPolicy{Enabled: true, ID: cfg.Group + "-" + member}
	return cfg
}

// checkExactlyOnce reads out at read_committed and holds it against the
// claims: every one of n inputs has its outputsPer outputs, each once,
// in its session's input order.
func checkExactlyOnce(t *testing.T, c *cluster, out string, n int) lanestest.OutputReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := lanestest.ReadOutputs(ctx, append([]kgo.Opt{kgo.SeedBrokers(c.brokers...)}, c.Opts()...), out)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Error(err)
	}
	if len(r.Inputs) != n || r.Outputs != n*outputsPer || r.Unmarked != 0 {
		t.Errorf("read_committed: %d inputs with outputs, %d outputs, %d unmarked; want %d inputs, %d outputs, 0 unmarked",
			len(r.Inputs), r.Outputs, r.Unmarked, n, n*outputsPer)
	}
	return r
}

// Exactly-once, claims 1 to 3 (docs/exactly-once.md), on kfake and on
// Kafka: 40 sessions × 60 inputs over 6 partitions, each input with two
// outputs and transient faults, handled by two members; a third joins
// after a third of the inputs, and the first leaves after two thirds (a
// rolling deploy's steps: revokes abort transactions, the partitions
// kept restart from the group's commit). Every input's outputs are read
// at read_committed exactly once, whole, in their session's input order;
// handler calls keep session order (the ledger: no violation, no
// overlap, none lost); the group's lag ends at 0.
func TestExactlyOnceRollingMembers(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 6)
	out := topic + "-out"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, 6, out); err != nil {
		t.Fatal(err)
	}
	l := lanestest.NewLedger()
	sessions := sessionNames(40)
	const per = 60
	total := len(sessions) * per
	c.produce(t, topic, sessions, per, l)
	h := func(m string) consumer.Handler {
		return l.Handler(m, txHandler(out, faults{transient: 0.05, work: time.Millisecond}))
	}
	m1 := startMember(t, "m1", c.txConfig("eos", topic, dlq, "m1"), h("m1"))
	m2 := startMember(t, "m2", c.txConfig("eos", topic, dlq, "m2"), h("m2"))
	waitFinished(t, l, total/3, 2*time.Minute)
	m3 := startMember(t, "m3", c.txConfig("eos", topic, dlq, "m3"), h("m3"))
	waitFinished(t, l, 2*total/3, 2*time.Minute)
	if err := m1.stop(); err != nil {
		t.Logf("m1 Run: %v", err) // a final transaction aborted by the leave's rebalance is redone by the next owner
	}
	waitFinished(t, l, total, 3*time.Minute)
	waitLagZero(t, c, groupName("eos"), topic, 2*time.Minute)
	for _, m := range []*member{m2, m3} {
		if err := m.stop(); err != nil {
			t.Logf("%s Run: %v", m.name, err)
		}
	}
	var aborted, committed int64
	for _, m := range []*member{m1, m2, m3} {
		st := m.c.Stats().Transactions
		aborted, committed = aborted+st.Aborted, committed+st.Committed
	}
	r := l.Report()
	t.Logf("%s: %d transactions committed, %d aborted; %s", c.name(), committed, aborted, r)
	if r.Violations > 0 || r.Overlaps > 0 || r.Lost > 0 {
		t.Errorf("session order or accounting broken: %s", r)
	}
	if committed == 0 || aborted == 0 {
		t.Errorf("%d committed, %d aborted: want both (the revokes abort)", committed, aborted)
	}
	checkExactlyOnce(t, c, out, total)
}
