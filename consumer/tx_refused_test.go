package consumer

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	t.Run("broker", func(t *testing.T) { testOutputRefusedForever(t, "65536", nil) })
	t.Run("client", func(t *testing.T) { testOutputRefusedForever(t, "", []kgo.Opt{kgo.ProducerBatchMaxBytes(16384)}) })
}

// testOutputRefusedForever runs TestTransactionsOutputRefusedForever with
// tx-out's max.message.bytes at limit ("": the broker's) and the group
// client's options opts.
func testOutputRefusedForever(t *testing.T, limit string, opts []kgo.Opt) {
	e := newEnv(t, 2, "tx-in", "dlq")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conf := map[string]*string{}
	if limit != "" {
		conf["max.message.bytes"] = &limit
	}
	if _, err := kadm.NewClient(e.client()).CreateTopic(ctx, 1, 1, conf, "tx-out"); err != nil {
		t.Fatal(err) // one partition: the large output's batch carries others
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
