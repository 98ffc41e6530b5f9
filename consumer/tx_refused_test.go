package consumer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsOutputRefusedForever: one input's output is always too
// large: larger than its topic's max.message.bytes (the broker refuses its
// batch, and every output batched with it), or than the producer's
// ProducerBatchMaxBytes (franz-go refuses it before sending). Each
// transaction carrying it
// aborts; the member does not stop there (it did: every transaction
// aborted for ever): once the input's outputs were refused twice, its next
// attempt fails for good (Message.Output says so) and it is dead-lettered
// in the transaction that commits its offset. Every other input's
// outputs are read once, in order, and nothing else is dead-lettered,
// though outputs of other inputs were refused with it (batched with it).
func TestTransactionsOutputRefusedForever(t *testing.T) {
	t.Run("broker", func(t *testing.T) { testOutputRefusedForever(t, "65536", nil, nil) })
	t.Run("client", func(t *testing.T) { testOutputRefusedForever(t, "", []kgo.Opt{kgo.ProducerBatchMaxBytes(16384)}, nil) })
	// The topic's limit cannot be read (no DESCRIBE_CONFIGS): the largest
	// refused output of each partition is named (found by review: a
	// failed read was kept as Kafka's default limit, and no input was ever
	// named).
	t.Run("limit unreadable", func(t *testing.T) { testOutputRefusedForever(t, "65536", nil, refuseDescribeConfigs) })
}

// refuseDescribeConfigs makes the broker refuse every DescribeConfigs.
func refuseDescribeConfigs(e *env) {
	e.c.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
}

// testOutputRefusedForever runs TestTransactionsOutputRefusedForever with
// tx-out's max.message.bytes at limit ("": the broker's), the group
// client's options opts, and setup (nil: none) run on the broker once
// tx-out exists.
func testOutputRefusedForever(t *testing.T, limit string, opts []kgo.Opt, setup func(*env)) {
	e := newEnv(t, 2, "tx-in", "dlq")
	e.limitedOut(t, 1, limit) // one partition: the large output's batch carries others
	if setup != nil {
		setup(e)
	}
	sessions := sessionNames(6)
	const per = 20
	e.produce("tx-in", sessions, per)
	big := sessions[2] + "|7"
	var outputErr atomic.Pointer[error] // what Output said to the large one's last attempt
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		v := string(m.Record.Value)
		r := &kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(v + "|0")}
		if v == big {
			junk := make([]byte, 100<<10) // does not compress
			_, _ = rand.Read(junk)
			r.Value = append(r.Value, junk...)
			err := m.Output(r)
			if err != nil {
				outputErr.Store(&err)
			}
			return nil // the handler ignores Output's error: the attempt fails all the same
		}
		return m.Output(r)
	})
	cfg := e.config("g-tx-refused-forever", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	cfg.ClientOptions = append(cfg.ClientOptions, opts...)
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-refused-forever") == int64(per*len(sessions)) },
		func() string { return fmt.Sprintf("%+v; %q", c.Stats().Transactions, c.Health().Reasons) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	st := c.Stats().Transactions
	t.Logf("%+v", st)
	if st.Aborted < 2 {
		t.Errorf("%d aborted: the large output must abort two transactions before its input is dead-lettered", st.Aborted)
	}
	if p := outputErr.Load(); p == nil || !IsPermanent(*p) || !strings.Contains((*p).Error(), "refused") {
		t.Errorf("Output's error on the large input's last attempt: %v, want a permanent one naming the refusal", p)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, map[string]bool{big: true})
	dl := readDLQ(t, e, 1)
	if string(dl[0].Value) != big {
		t.Errorf("dead letter %q, want %q", dl[0].Value, big)
	}
}

// TestTransactionsTwoRefusedOnOnePartition: two inputs' outputs are both
// too large for their one output partition. Each abort names both (found
// by review: naming only the largest refused output of a partition, and
// forgetting an input once an attempt took it, made the two take turns:
// 486 aborts in 30 s and nothing committed). Both are dead-lettered and
// everything else commits, once.
func TestTransactionsTwoRefusedOnOnePartition(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq")
	e.limitedOut(t, 1, "65536")
	sessions := sessionNames(6)
	const per = 20
	e.produce("tx-in", sessions, per)
	bigs := map[string]int{sessions[2] + "|7": 100 << 10, sessions[4] + "|9": 90 << 10}
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		v := string(m.Record.Value)
		r := &kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(v + "|0")}
		if n, ok := bigs[v]; ok {
			junk := make([]byte, n)
			_, _ = rand.Read(junk)
			r.Value = append(r.Value, junk...)
		}
		return m.Output(r)
	})
	cfg := e.config("g-tx-two-refused", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "every input committed", func() bool { return committedSum(e, "g-tx-two-refused") == int64(per*len(sessions)) },
		func() string { return fmt.Sprintf("%+v", c.Stats().Transactions) })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%+v", c.Stats().Transactions)
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, map[string]bool{sessions[2] + "|7": true, sessions[4] + "|9": true})
	got := map[string]bool{}
	for _, r := range readDLQ(t, e, 2) {
		got[string(r.Value)] = true
	}
	if !got[sessions[2]+"|7"] || !got[sessions[4]+"|9"] {
		t.Errorf("dead letters %v, want both large inputs", got)
	}
}

// TestTransactionsRefusedBatchesNameNothing: every output fits its topic
// alone, but the producer's batches do not (ProducerBatchMaxBytes above
// the topic's max.message.bytes): no input is to blame, and none is
// dead-lettered (found by review: the largest of each refused batch was,
// every valid input in turn). Transactions abort until the configuration
// is fixed; the log says what to set.
func TestTransactionsRefusedBatchesNameNothing(t *testing.T) {
	e := newEnv(t, 2, "tx-in", "dlq")
	e.limitedOut(t, 1, "65536")
	e.produce("tx-in", sessionNames(8), 10)
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		_, seq := parseValue(m.Record.Value)
		junk := make([]byte, 8<<10+seq*400) // 8–12 KiB: each fits, a batch of several does not
		_, _ = rand.Read(junk)
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: append([]byte(string(m.Record.Value)+"|0|"), junk...)})
	})
	cfg := e.config("g-tx-refused-batches", "tx-in")
	cfg.CommitInterval = 500 * time.Millisecond
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "four transactions aborted", func() bool { return c.Stats().Transactions.Aborted >= 4 }, nil)
	_ = stop()
	if n := c.Stats().DeadLettered; n != 0 {
		t.Errorf("%d inputs dead-lettered, though each output fits its topic alone", n)
	}
}

// TestTransactionsDeadLetterTooLarge: with transactions, a record whose
// dead-letter copy is larger than the dead-letter topic takes holds its
// partition, as without them (TestDLQCopyTooLargeHoldsPartition): the
// other inputs' outputs commit, Stats and Health name the copy, and the
// shutdown names it unfinished. Before, the copy went into the
// transaction, the broker refused it at every commit, and every
// transaction of the member aborted (1,682 in 90 s). Limit unread: the
// dead-letter topic's max.message.bytes cannot be read at Run (no
// DESCRIBE_CONFIGS), so the copy goes into one transaction; refused
// there, it is not sent again (found by review: 165 aborts in 10 s).
func TestTransactionsDeadLetterTooLarge(t *testing.T) {
	t.Run("limit read", func(t *testing.T) { testDeadLetterTooLarge(t, nil, 0) })
	t.Run("limit unread", func(t *testing.T) { testDeadLetterTooLarge(t, refuseDescribeConfigs, 2) })
}

// testDeadLetterTooLarge runs TestTransactionsDeadLetterTooLarge with
// setup (nil: none) run on the broker before the member starts, allowing
// aborts transactions to abort.
func testDeadLetterTooLarge(t *testing.T, setup func(*env), aborts int64) {
	e := newEnv(t, 1, "tx-in", "tx-out")
	e.createTopic("dlq", "5000")
	e.produceSized("tx-in", "big", 8000) // offset 0
	sessions := sessionNames(4)
	const per = 10
	e.produce("tx-in", sessions, per)
	if setup != nil {
		setup(e)
	}
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		if m.SessionID == "big" {
			return Permanent(errors.New("cannot parse"))
		}
		return m.Output(&kgo.Record{Topic: "tx-out", Key: m.Record.Key, Value: []byte(string(m.Record.Value) + "|0")})
	})
	cfg := e.config("g-tx-dlq-large", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the copy held and every other input's output in a transaction", func() bool {
		st := c.Stats()
		return st.DeadLetterBlocked > 0 && st.Transactions.Outputs >= int64(per*len(sessions)) && st.Transactions.Committed > 0
	}, func() string {
		st := c.Stats()
		return fmt.Sprintf("blocked %d; %+v", st.DeadLetterBlocked, st.Transactions)
	})
	ps := c.Stats().Partitions[0]
	if ps.DeadLetterBlockedAt != 0 || !strings.Contains(ps.DeadLetterError, "MESSAGE_TOO_LARGE") || ps.Watermark != 0 {
		t.Errorf("partition stats %+v: want the copy of offset 0 held with MESSAGE_TOO_LARGE, watermark 0", ps)
	}
	if r := strings.Join(c.Health().Reasons, "\n"); !strings.Contains(r, "dead-letter writes failing") || !strings.Contains(r, "MESSAGE_TOO_LARGE") {
		t.Errorf("Health reasons %q: want the held copy named", r)
	}
	err = stop()
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Errorf("Run: %v; want ErrUnfinished naming the copy that cannot be written", err)
	}
	st := c.Stats()
	t.Logf("%+v; %s", st.Transactions, ps.DeadLetterError)
	if st.Transactions.Aborted > aborts {
		t.Errorf("%d transactions aborted, want at most %d: the copy went into more", st.Transactions.Aborted, aborts)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), sessions, per, 1, nil)
	if o := committedSum(e, "g-tx-dlq-large"); o != 0 {
		t.Errorf("committed %d: the held record at offset 0 must hold the partition's commit", o)
	}
}

// TestTransactionsDeadLetterFits: with transactions and every limit at
// its default, a record just under the producer's batch limit that fails
// with a long error is dead-lettered: its copy's error text is cut to fit
// with the stamps every output gets (found by review: cut for Kafka's
// larger max.message.bytes, the copy was held for ever).
func TestTransactionsDeadLetterFits(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	e.produceSized("tx-in", "big", 999_500)
	long := strings.Repeat("cannot parse ", 200)
	h := HandlerFunc(func(ctx context.Context, m *Message) error { return Permanent(errors.New(long)) })
	cfg := e.config("g-tx-dlq-fits", "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the record committed", func() bool { return committedSum(e, "g-tx-dlq-fits") == 1 },
		func() string {
			st := c.Stats()
			return fmt.Sprintf("blocked %d; %+v; %q", st.DeadLetterBlocked, st.Transactions, c.Health().Reasons)
		})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	dl := readDLQ(t, e, 1)
	if n := len(dl[0].Value); n != 999_500 {
		t.Errorf("dead letter of %d bytes, want 999500", n)
	}
	if got := header(dl[0], HeaderDLQError); got == "" || len(got) >= len(long) {
		t.Errorf("error text of %d bytes, want cut from %d", len(got), len(long))
	}
}
