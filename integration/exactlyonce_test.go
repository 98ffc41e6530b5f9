package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// eosWorld makes the exactly-once scenarios' topics (input, its DLQ and
// the output topic, 6 partitions each) and produces per inputs for each of
// 40 sessions, acknowledged in the returned ledger; total is their count.
func (c *cluster) eosWorld(t *testing.T, per int) (topic, dlq, out string, l *lanestest.Ledger, total int) {
	t.Helper()
	topic, dlq = c.topics(t, 6)
	out = topic + "-out"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, 6, out); err != nil {
		t.Fatal(err)
	}
	l = lanestest.NewLedger()
	sessions := sessionNames(40)
	c.produce(t, topic, sessions, per, l)
	return topic, dlq, out, l, len(sessions) * per
}

// checkExactlyOnce reads out at read_committed and holds it against the
// claims: every one of n inputs has its outputsPer outputs, each once,
// in its session's input order.
func checkExactlyOnce(t *testing.T, c *cluster, out string, n int) lanestest.OutputReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for { // a transaction left open (a killed member's, until its ID is used again or it times out) holds what follows it
		stable, err1 := adm.ListCommittedOffsets(ctx, out)
		ends, err2 := adm.ListEndOffsets(ctx, out)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("offsets of %s: %v", out, err)
		}
		open := 0
		ends.Each(func(o kadm.ListedOffset) {
			if s, _ := stable.Lookup(o.Topic, o.Partition); s.Offset != o.Offset {
				open++
			}
		})
		if open == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d partitions of %s still hold an open transaction", open, out)
		case <-time.After(200 * time.Millisecond): // the broker tells no one when a transaction ends: look again
		}
	}
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
// rolling deploy's steps: a revoke that meets an open transaction aborts
// it, and the partitions kept restart from the group's commit; whether
// one does depends on timing, so aborts are reported, not required). Every input's outputs are read
// at read_committed exactly once, whole, in their session's input order;
// handler calls keep session order (the ledger: no violation, no
// overlap, none lost); the group's lag ends at 0.
func TestExactlyOnceRollingMembers(t *testing.T) {
	c := newCluster(t)
	const per = 60
	topic, dlq, out, l, total := c.eosWorld(t, per)
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
	var ending time.Duration
	for _, m := range []*member{m1, m2, m3} {
		st := m.c.Stats().Transactions
		aborted, committed, ending = aborted+st.Aborted, committed+st.Committed, ending+st.EndTime
	}
	r := l.Report()
	t.Logf("%s: %d transactions committed (%v each to end, mean), %d aborted; %s", c.name(), committed, ending/time.Duration(max(committed, 1)), aborted, r)
	if r.Violations > 0 || r.Overlaps > 0 || r.Lost > 0 {
		t.Errorf("session order or accounting broken: %s", r)
	}
	if committed == 0 {
		t.Errorf("no transaction committed (%d aborted)", aborted)
	}
	checkExactlyOnce(t, c, out, total)
}

// Exactly-once with a fenced member (docs/exactly-once.md): two members
// join; before any input is written, another process takes m1's
// transactional ID (its producer initialised under it fences m1's); then
// 40 sessions × 80 inputs are written. m1 learns it is fenced with its
// first transaction that holds something; it is not left dead: it leaves
// its group and joins again under a new transactional ID within its Run
// (Stats.Transactions.Rejoins), the two members finish everything, and
// every input's outputs are read at read_committed exactly once, whole,
// in their session's input order.
func TestExactlyOnceFencedRejoins(t *testing.T) {
	c := newCluster(t)
	const per = 80
	topic, dlq := c.topics(t, 6)
	out := topic + "-out"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, 6, out); err != nil {
		t.Fatal(err)
	}
	l := lanestest.NewLedger()
	h := func(m string) consumer.Handler {
		return l.Handler(m, txHandler(out, faults{work: 2 * time.Millisecond}))
	}
	cfg1 := c.txConfig("eos-fenced", topic, dlq, "m1")
	m1 := startMember(t, "m1", cfg1, h("m1"))
	m2 := startMember(t, "m2", c.txConfig("eos-fenced", topic, dlq, "m2"), h("m2"))
	waitFor(t, "both members own partitions", 2*time.Minute, func() bool {
		return len(m1.c.Stats().Partitions) > 0 && len(m2.c.Stats().Partitions) > 0
	})

	var stale atomic.Int64 // m1's EndTxn after it was fenced (kfake)
	intruderEpoch := func(int16) {}
	if f := c.Fake(); f != nil {
		intruderEpoch = kafkaFences(f, cfg1.Transactions.ID, &stale)
	}
	intruder := c.client(t, kgo.TransactionalID(cfg1.Transactions.ID))
	if err := intruder.BeginTransaction(); err != nil { // initialises a producer under m1's ID: m1's is fenced
		t.Fatal(err)
	}
	_, epoch, err := intruder.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	intruderEpoch(epoch)
	if err := intruder.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	intruder.Close()

	sessions := sessionNames(40)
	c.produce(t, topic, sessions, per, l)
	total := len(sessions) * per
	waitFor(t, "m1 joined again", 2*time.Minute, func() bool { return m1.c.Stats().Transactions.Rejoins > 0 })
	waitFinished(t, l, total, 3*time.Minute)
	waitLagZero(t, c, groupName("eos-fenced"), topic, 2*time.Minute)
	for _, m := range []*member{m1, m2} {
		switch err := m.stop(); {
		case errors.Is(err, consumer.ErrFenced):
			t.Errorf("%s Run: %v: it had joined again", m.name, err)
		case err != nil:
			t.Logf("%s Run: %v", m.name, err) // a final transaction aborted by the other's leave is redone by the next owner
		}
	}
	st := m1.c.Stats().Transactions
	r := l.Report()
	t.Logf("%s: m1 %+v (EndTxn of its fenced producer: %d); %s", c.name(), st, stale.Load(), r)
	if r.Violations > 0 || r.Overlaps > 0 || r.Lost > 0 {
		t.Errorf("session order or accounting broken: %s", r)
	}
	checkExactlyOnce(t, c, out, total)
}

// Exactly-once, claim 3 under SIGKILL (docs/exactly-once.md): consumers
// run as child processes in the transactional mode, each slot keeping its
// transactional ID across restarts (as a StatefulSet's pods do), and are
// killed with SIGKILL at random points, mid-transaction, four times, then
// restarted. Every input's outputs are read at read_committed exactly
// once, whole, in their session's input order; no input is lost.
func TestCrashExactlyOnce(t *testing.T) {
	longOnly(t, "the exactly-once crash scenario")
	c := newCluster(t)
	const per = 150
	topic, dlq, out, l, total := c.eosWorld(t, per)
	group := groupName("eos-crash")
	ch := newChildren(t, c.brokers, group, topic, dlq)
	spawn := func(slot int) string {
		return ch.spawn("LANES_TX_OUT="+out, "LANES_TX_ID="+group+"-slot"+strconv.Itoa(slot))
	}
	procs := []string{spawn(0), spawn(1)}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	for kills < 4 && ch.calls.load(t, l) < total {
		waitProgress(t, ch.calls, l, 200, total, func() { ch.ghosts(c, group) })
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // a random point: mid-transaction (100 ms each)
		k := rng.IntN(len(procs))
		ch.kill(procs[k])
		kills++
		procs[k] = spawn(k)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for ch.calls.load(t, l) < total {
		ch.ghosts(c, group)
		if time.Now().After(deadline) {
			logGroup(t, c, group, topic)
			t.Fatalf("timed out: %d of %d handled", l.Accounted(), total)
		}
		time.Sleep(200 * time.Millisecond) // the children report through files: poll them
	}
	waitLagZero(t, c, group, topic, 3*time.Minute)
	for _, p := range procs {
		if err := ch.term(p); err != nil {
			t.Errorf("child exit: %v", err)
		}
	}
	ch.calls.load(t, l)
	r := l.Report()
	t.Logf("%s: %d SIGKILLs, %d consumer processes; %s", c.name(), kills, ch.n, r)
	if r.Violations > 0 || r.Lost > 0 {
		t.Errorf("session order or accounting broken: %s", r)
	}
	checkExactlyOnce(t, c, out, total)
}

// kafkaFences makes kfake fence as Kafka does the producer of
// transactional ID id once another process took the ID (initialised a
// producer under it, epoch -1): Kafka refuses the old producer's EndTxn
// (PRODUCER_FENCED: after an init the ID's state is Empty, where the epoch
// must be equal; no transaction of the ID just ended for it to be a retry
// of). kfake takes an EndTxn whose epoch is one behind, with no
// transaction open, for a retry of an EndTxn that went through, and
// answers it with the new epoch: a member that aborted a transaction with
// nothing produced just after the intruder came took the intruder's epoch
// and was never fenced (3 runs in 34 under -race). Refused: an EndTxn for
// id below the intruder's epoch (told through the returned func), or any
// until it is told (the intruder sends none: it produces nothing); n
// counts them.
func kafkaFences(f *kfake.Cluster, id string, n *atomic.Int64) (intruderEpoch func(int16)) {
	var taken atomic.Bool
	var epoch atomic.Int32 // the intruder's, +1; 0 until told
	f.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.KeepControl()
		if req := kr.(*kmsg.InitProducerIDRequest); req.TransactionalID != nil && *req.TransactionalID == id && req.ProducerEpoch < 0 {
			taken.Store(true)
		}
		return nil, nil, false
	})
	f.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.KeepControl()
		req := kr.(*kmsg.EndTxnRequest)
		if e := epoch.Load(); req.TransactionalID != id || !taken.Load() || e > 0 && int32(req.ProducerEpoch) >= e-1 {
			return nil, nil, false
		}
		n.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	return func(e int16) { epoch.Store(int32(e) + 1) }
}
