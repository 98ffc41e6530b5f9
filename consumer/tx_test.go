package consumer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txOutputs is what a reader of the output topic saw: each output's
// value "session|seq|k" with its partition and offset, in offset order
// per partition.
type txOutputs struct {
	count  map[string]int            // "session|seq|k" → times seen
	order  map[string][]string       // session → its outputs' values, in partition order
	parts  map[string]map[int32]bool // session → partitions it was seen on
	bySeq  map[string]map[int]int    // session → seq → outputs seen
	values []string                  // every value, as read
}

// readOutputs reads topic from its start to its end now, at the given
// isolation level.
func readOutputs(t *testing.T, e *env, topic string, committed bool) txOutputs {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	adm := kadm.NewClient(e.client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if committed {
		// ListEndOffsets at read_committed: the last stable offset.
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	}
	if err != nil {
		t.Fatalf("list ends of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	cl := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.KeepControlRecords()) // a transaction's marker may be the last thing before the end
	out := txOutputs{count: map[string]int{}, order: map[string][]string{}, parts: map[string]map[int32]bool{}, bySeq: map[string]map[int]int{}}
	at := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if at[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: at %v, want %v: %v", topic, at, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			at[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			v := string(r.Value)
			s, rest, _ := strings.Cut(v, "|")
			seqS, _, _ := strings.Cut(rest, "|")
			seq, _ := strconv.Atoi(seqS)
			out.values = append(out.values, v)
			out.count[v]++
			out.order[s] = append(out.order[s], v)
			if out.parts[s] == nil {
				out.parts[s], out.bySeq[s] = map[int32]bool{}, map[int]int{}
			}
			out.parts[s][r.Partition] = true
			out.bySeq[s][seq]++
		})
	}
	return out
}

// checkOutputs holds out against the claims: every input of each session
// has exactly its k outputs, each once, on one partition per session, in
// input order (seq, then k); inputs in skip have none.
func checkOutputs(t *testing.T, out txOutputs, sessions []string, per, k int, skip map[string]bool) {
	t.Helper()
	for _, s := range sessions {
		if len(out.parts[s]) > 1 {
			t.Errorf("session %s: outputs on %d partitions, want one", s, len(out.parts[s]))
		}
		var want []string
		for seq := range per {
			key := s + "|" + strconv.Itoa(seq)
			if skip[key] {
				if n := out.bySeq[s][seq]; n != 0 {
					t.Errorf("%s: %d outputs, want none (dead-lettered)", key, n)
				}
				continue
			}
			for j := range k {
				v := key + "|" + strconv.Itoa(j)
				want = append(want, v)
				if n := out.count[v]; n != 1 {
					t.Errorf("output %s seen %d times, want once", v, n)
				}
			}
		}
		if got := out.order[s]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("session %s: outputs out of input order or incomplete:\n got %d: %.300v\nwant %d: %.300v", s, len(got), got, len(want), want)
		}
	}
}

// TestTransactionsExactlyOnce: claims 1 and 2 on kfake. 20 sessions × 30
// inputs over 4 partitions; each input's handler outputs 2 records keyed
// by its session; every seventh input fails its first attempt after
// adding its outputs (those must never appear); one input is poison
// (dead-lettered: its copy commits with its offset, and it has no
// outputs). A second member joins once a third is handled: the first
// one's open transaction aborts (a revoke) and its partitions restart
// from the group's commit. A read_committed reader then sees every
// input's outputs exactly once, in each session's input order on one
// partition.
func TestTransactionsExactlyOnce(t *testing.T) {
	e := newEnv(t, 4, "tx-in", "dlq")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 3, 1, nil, "tx-out"); err != nil {
		t.Fatal(err)
	}
	sessions := sessionNames(20)
	const per, k = 30, 2
	e.produce("tx-in", sessions, per)
	poison := sessions[5] + "|10"
	var failedOnce sync.Map
	var handled atomic.Int64
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		v := string(m.Record.Value)
		for j := range k {
			if err := m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(v + "|" + strconv.Itoa(j))}); err != nil {
				return Permanent(err)
			}
		}
		if v == poison {
			return Permanent(errors.New("poison"))
		}
		if _, seq := parseValue(m.Record.Value); seq%7 == 3 {
			if _, again := failedOnce.LoadOrStore(v, true); !again {
				return fmt.Errorf("first attempt of %s fails after its outputs", v)
			}
		}
		handled.Add(1)
		return nil
	})
	cfg := e.config("g-tx", "tx-in")
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true, ID: "tx-a"}
	a, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	waitFor(t, "a third of the inputs handled and a transaction committed", func() bool {
		return handled.Load() >= per*int64(len(sessions))/3 && a.Stats().Transactions.Committed > 0
	}, nil)

	cfg.Transactions.ID = "tx-b"
	b, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stopB := start(t, b)
	// a may have handled everything by now: the revoke (and a's abort)
	// comes with b's first partitions, which the test waits for.
	waitFor(t, "b owns partitions", func() bool { return len(b.Stats().Partitions) > 0 }, nil)
	total := int64(per*len(sessions)) - 1
	end := map[int32]int64{}
	waitFor(t, "every input committed", func() bool {
		offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), "g-tx")
		if err != nil {
			return false
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.Topic == "tx-in" {
				sum += o.At
				end[o.Partition] = o.At
			}
		})
		return sum == total+1
	}, func() string { return fmt.Sprintf("committed %v; handled %d", end, handled.Load()) })
	if err := stopB(); err != nil {
		t.Errorf("Run (b): %v", err)
	}
	if err := stopA(); err != nil {
		t.Errorf("Run (a): %v", err)
	}
	st := a.Stats().Transactions
	t.Logf("a: %+v; b: %+v", st, b.Stats().Transactions)
	if st.Aborted == 0 || st.Rewinds == 0 {
		t.Errorf("member a: %d aborted, %d rewinds: want the revoke to abort its transaction and rewind", st.Aborted, st.Rewinds)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, k, map[string]bool{poison: true})
	dl := readDLQ(t, e, 1)
	if string(dl[0].Value) != poison {
		t.Errorf("dead letter %q, want %q", dl[0].Value, poison)
	}
}

// TestTransactionsRefusedOutput: an output the broker refuses (larger
// than its topic's max.message.bytes) aborts its transaction; the
// partitions restart from the group's commit and the inputs it held are
// handled again: every input's outputs are seen exactly once at
// read_committed, and the refused one never, while a read_uncommitted
// reader sees the aborted transaction's outputs too (so an abort with
// outputs in it did happen). One handler returns only after the abort:
// its outputs are dropped with its fenced partition, not produced into
// the next transaction (which would show them twice).
func TestTransactionsRefusedOutput(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq")
	e.limitedOut(t, 3, "2048") // three partitions: the refused output's batch fails alone, the others' outputs are written
	sessions := sessionNames(6)
	const per, k = 20, 1
	e.produce("tx-in", sessions, per)
	var big atomic.Bool
	var cons atomic.Pointer[Consumer]
	var late atomic.Bool // sessions[4]'s fourth input returns only once the abort fenced its partition
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		v := string(m.Record.Value) + "|0"
		if v == sessions[4]+"|3|0" && late.CompareAndSwap(false, true) {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for cons.Load().Stats().Transactions.Aborted == 0 { // no signal to wait on: Stats is what a user sees
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
			}
			// its outputs must be dropped, not produced into the next transaction
		}
		if v == sessions[2]+"|7|0" && big.CompareAndSwap(false, true) { // once: too large for tx-out
			junk := make([]byte, 8192) // does not compress: brokers measure max.message.bytes after compression
			_, _ = rand.Read(junk)
			return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: append([]byte(v+"|"), junk...)})
		}
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(v)})
	})
	cfg := e.config("g-tx-refused", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	cons.Store(c)
	stop := start(t, c)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-refused") == int64(per*len(sessions)) }, func() string { return fmt.Sprintf("%+v", c.Stats().Transactions) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	st := c.Stats().Transactions
	if st.Aborted == 0 || st.Rewinds == 0 {
		t.Errorf("%d aborted, %d rewinds: the refused output must abort its transaction", st.Aborted, st.Rewinds)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, k, nil)
	all := readOutputs(t, e, "tx-out", false)
	if len(all.values) <= per*len(sessions)*k {
		t.Errorf("read_uncommitted: %d outputs, want more than the %d committed: the aborted transaction's must be there", len(all.values), per*len(sessions)*k)
	}
}

// TestTransactionsConfig: what the mode refuses, and Output without it.
func TestTransactionsConfig(t *testing.T) {
	base := Config{Brokers: []string{"localhost:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "dlq"}
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	for name, tc := range map[string]struct {
		mod   func(*Config)
		field string
	}{
		"park":          {func(c *Config) { c.Park = ParkPolicy{Enabled: true} }, "Park"},
		"skip stalled":  {func(c *Config) { c.SkipStalled = true }, "SkipStalled"},
		"short timeout": {func(c *Config) { c.CommitInterval = time.Second; c.Transactions.Timeout = time.Second }, "Transactions.Timeout"},
		"not enabled":   {func(c *Config) { c.Transactions = TransactionPolicy{ID: "x"} }, "Transactions"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Transactions = TransactionPolicy{Enabled: true}
			tc.mod(&cfg)
			_, err := New(cfg, h)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New: %v, want ErrConfig naming %s", err, tc.field)
			}
		})
	}
	cfg := base
	cfg.Transactions = TransactionPolicy{Enabled: true}
	if _, err := NewBatch(cfg, BatchHandlerFunc(func(context.Context, []*Message) error { return nil })); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewBatch with Transactions: %v, want ErrConfig", err)
	}
	var m Message
	if err := m.Output(&kgo.Record{Topic: "x"}); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("Output without Transactions: %v, want ErrNotTransactional", err)
	}
	m.out = new(outputs)
	if err := m.Output(&kgo.Record{}); err == nil {
		t.Fatal("Output of a record without a topic: no error")
	}
}

// TestTransactionsHealth: while every transaction aborts (an output the
// broker refuses, each time), Health says so once three have aborted in a
// row, and the reason clears when one commits.
func TestTransactionsHealth(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	e.produce("tx-in", sessionNames(3), 5)
	// The broker refuses every output (not for its size: no input is to
	// blame, none is dead-lettered) while refuse is set.
	refuse, _ := e.refuseWrites("tx-out")
	refuse.Store(true)
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: m.Record.Value})
	})
	cfg := e.config("g-tx-health", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	reason := func() string {
		for _, r := range c.Health().Reasons {
			if strings.HasPrefix(r, "transactions: the last") {
				return r
			}
		}
		return ""
	}
	waitFor(t, "the Health reason of transactions aborting", func() bool { return reason() != "" },
		func() string { return fmt.Sprintf("%+v; %q", c.Stats().Transactions, c.Health().Reasons) })
	if r := reason(); !strings.Contains(r, "an output was refused") {
		t.Errorf("reason %q does not say why", r)
	}
	refuse.Store(false)
	waitFor(t, "the reason to clear once a transaction commits", func() bool { return reason() == "" && e.committedAt("g-tx-health", "tx-in") == 15 },
		func() string { return fmt.Sprintf("%+v; %q", c.Stats().Transactions, c.Health().Reasons) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestTransactionsIdle: a member with nothing to commit and no outputs
// ends no transaction (an empty end costs franz-go half a second, during
// which no record could finish): Committed stays where it was over ten
// intervals with nothing to consume, and moves again once inputs arrive.
func TestTransactionsIdle(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	cfg := e.config("g-tx-idle", "tx-in")
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, HandlerFunc(func(ctx context.Context, m *Message) error {
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: m.Record.Value})
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produce("tx-in", sessionNames(2), 3)
	lanesCommitted := func() int64 { // the member's own view: set after its transaction counted
		for _, p := range c.Stats().Partitions {
			return p.Committed
		}
		return -1
	}
	waitFor(t, "the inputs committed", func() bool { return lanesCommitted() == 6 }, nil)
	before := c.Stats().Transactions
	time.Sleep(60 * cfg.CommitInterval) // what must not happen has no signal: let 60 intervals pass (an empty end takes 500 ms)
	if idle := c.Stats().Transactions; idle.Committed != before.Committed || idle.Aborted != before.Aborted {
		t.Errorf("idle: %+v, then %+v: an empty transaction was ended", before, idle)
	}
	e.produce("tx-in", sessionNames(2), 1)
	waitFor(t, "the new inputs committed", func() bool { return e.committedAt("g-tx-idle", "tx-in") == 8 && lanesCommitted() == 8 }, nil)
	before = c.Stats().Transactions
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	// Nothing left to commit: the shutdown ends no transaction (an empty
	// end that commits costs franz-go 500 ms when it sent no offsets).
	if after := c.Stats().Transactions; after.Committed != before.Committed || after.Aborted != before.Aborted {
		t.Errorf("shutdown: %+v, then %+v: an empty transaction was ended", before, after)
	}
}

// TestTransactionsFinishWhileEnding: records that finish while a
// transaction ends (the broker slow to answer EndTxn, 300 ms, three times)
// do not wait for it: they are kept and finished into the next
// transaction, in order, before any record that finishes after the end.
// Every input's outputs are read once, in session order, and records were
// kept (the path ran).
func TestTransactionsFinishWhileEnding(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq", "tx-out")
	sessions := sessionNames(8)
	const per = 40
	e.produce("tx-in", sessions, per)
	var slow atomic.Int32
	e.c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if slow.Add(1) <= 3 {
			e.sleepFor(300 * time.Millisecond) // a slow end: records finish meanwhile
		}
		return nil, nil, false
	})
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		time.Sleep(time.Millisecond) // work: records keep finishing while a transaction ends
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
	})
	cfg := e.config("g-tx-ending", "tx-in")
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-ending") == int64(per*len(sessions)) },
		func() string { return fmt.Sprintf("%+v", c.Stats().Transactions) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	c.tx.keptMu.Lock()
	kept := c.tx.keptN
	c.tx.keptMu.Unlock()
	if kept == 0 {
		t.Errorf("no record finished while a transaction ended: the test did not exercise the path (%+v)", c.Stats().Transactions)
	}
	t.Logf("%d records kept while a transaction ended; %+v", kept, c.Stats().Transactions)
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, nil)
}

// committedSum is the sum of group's committed offsets (0 before it
// committed anything).
func committedSum(e *env, group string) int64 {
	offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), group)
	if err != nil {
		return 0 // not yet: no commit made the group
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += max(o.At, 0) })
	return sum
}

// limitedOut creates tx-out with partitions and max.message.bytes limit
// ("": the broker's).
func (e *env) limitedOut(t *testing.T, partitions int32, limit string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conf := map[string]*string{}
	if limit != "" {
		conf["max.message.bytes"] = &limit
	}
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, partitions, 1, conf, "tx-out"); err != nil {
		t.Fatal(err)
	}
}

// echoOutput is a transactional handler: each input's one output to
// tx-out, its value the input's with "|0".
var echoOutput = HandlerFunc(func(_ context.Context, m *Message) error {
	return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
})

// seqValues is the values "session|seq" for seq from from to to-1, each
// seq's sessions in the order given.
func seqValues(from, to int, sessions ...string) (vs []string) {
	for seq := from; seq < to; seq++ {
		for _, s := range sessions {
			vs = append(vs, s+"|"+strconv.Itoa(seq))
		}
	}
	return vs
}
