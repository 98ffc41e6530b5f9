package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsStableRewind: a transactional member whose transaction
// aborted rewinds to the group's committed offsets read as settled
// (require_stable, KIP-447). Here a transaction of another producer
// (standing for the member's own commit that went through unconfirmed,
// its coordinator killed) holds the outputs of inputs 10 to 14 and the
// offset 15, not yet ended, when the member's transaction over inputs 10
// to 19 aborts (an output refused). Read unsettled, the offset was 10:
// the member handled 10 to 14 again and their outputs were read twice
// (TestClusterLeaderKilledExactlyOnce on Kafka: 4,775 inputs). Read
// settled, it waits for that transaction to end and goes on from 15:
// every input's output once, in order.
func TestTransactionsStableRewind(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	const group = "g-tx-stable"
	values := func(from, to int) []string { return seqValues(from, to, "a", "b") } // offsets 2*from to 2*to-1
	h := echoOutput
	cfg := e.config(group, "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	e.produceValues("tx-in", values(0, 5)...) // offsets 0 to 9
	waitFor(t, "offsets 0 to 9 committed", func() bool { return committedSum(e, group) == 10 }, nil)

	// The other transaction: outputs of inputs 10 to 14, as the member
	// stamps them, and the offset 15; left open.
	var outs []*kgo.Record
	for k, v := range values(5, 10)[:5] {
		outs = append(outs, stampedOutput(v, 10+k))
	}
	other := pendingOffsetCommit(t, e, group+"-other", group, "tx-in", 15, "", outs)

	var armed atomic.Bool // the member's next write to tx-out is refused: its transaction aborts
	armed.Store(true)
	e.answerProduce("tx-out", func([]byte) int16 {
		if armed.CompareAndSwap(true, false) {
			return kerr.TopicAuthorizationFailed.Code
		}
		return 0
	})
	var fetches atomic.Int64 // OffsetFetch requests since the refusal: the rewind's
	e.c.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if !armed.Load() {
			fetches.Add(1)
		}
		return nil, nil, false
	})
	e.produceValues("tx-in", values(5, 10)...) // offsets 10 to 19
	waitFor(t, "the group's offsets read after the abort", func() bool { return fetches.Load() > 0 }, nil)
	endTxn(t, other, kgo.TryCommit)
	waitFor(t, "every input committed", func() bool { return committedSum(e, group) == 20 }, func() string { return fmt.Sprintf("%+v", c.Stats().Transactions) })
	if n := c.Stats().Transactions.Aborted; n == 0 {
		t.Error("no transaction aborted: the rewind was not tried")
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), []string{"a", "b"}, 10, 1, nil)
}

// pendingOffsetCommit writes outs and commits offset at (with commit
// metadata meta) of partition 0 of topic for group in one transaction of
// a producer of its own, transactional ID id, and leaves it open: the
// caller ends it through the returned client (endTxn).
func pendingOffsetCommit(t *testing.T, e *env, id, group, topic string, at int64, meta string, outs []*kgo.Record) *kgo.Client {
	t.Helper()
	cl := e.client(kgo.TransactionalID(id))
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, outs...).FirstErr(); err != nil {
		t.Fatalf("produce the outputs: %v", err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
	ar, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ar.ErrorCode)
	}
	if err != nil {
		t.Fatalf("add offsets to the transaction: %v", err)
	}
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = id, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for tid, name := range e.topicNames() {
		if name == topic {
			rt.TopicID = tid // v6 names topics by ID
		}
	}
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 0, at, -1, &meta
	rt.Partitions = append(rt.Partitions, rp)
	oc.Topics = append(oc.Topics, rt)
	or, err := oc.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(or.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("transactional offset commit: %v", err)
	}
	return cl
}

// endTxn ends cl's open transaction as try says.
func endTxn(t *testing.T, cl *kgo.Client, try kgo.TransactionEndTry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := cl.EndTransaction(ctx, try); err != nil {
		t.Errorf("end the transaction: %v", err)
	}
}

// stampedOutput is the output of input value v at offset off of tx-in/0,
// stamped as the member stamps its outputs.
func stampedOutput(v string, off int) *kgo.Record {
	r := &kgo.Record{Topic: "tx-out", Key: []byte(v[:1]), Value: []byte(v + "|0")}
	eventid.SetHeader(r, HeaderInput, "tx-in/0@"+strconv.Itoa(off))
	eventid.SetHeader(r, HeaderOutput, "0/1")
	return r
}

// TestTransactionsPendingAtAssignment: a member killed inside its end
// (its offset commit sent, its EndTxn not) leaves its offsets pending
// until its transaction times out and aborts. A member assigned the
// partition meanwhile does not wait for ever: past CommitTimeout it starts
// from the last settled commit, its completed offsets skipped, and every
// input's output is read once (found by review: giving up the read, it
// handled a completed input again and never committed the partition).
func TestTransactionsPendingAtAssignment(t *testing.T) {
	e := newEnv(t, 1, "tx-in", "dlq", "tx-out")
	const group = "g-tx-pending"
	var vs []string
	for seq := range 5 {
		vs = append(vs, "a|"+strconv.Itoa(seq), "b|"+strconv.Itoa(seq))
	}
	e.produceValues("tx-in", vs...) // offsets 0 to 9
	prev := pendingOffsetCommit(t, e, group+"-prev", group, "tx-in", 2, offsets.EncodeMetadata(2, []offsets.Range{{Start: 3, End: 3}}, 4096),
		[]*kgo.Record{stampedOutput(vs[0], 0), stampedOutput(vs[1], 1), stampedOutput(vs[3], 3)})
	endTxn(t, prev, kgo.TryCommit) // 0, 1 and 3 committed; 2 the watermark
	killed := pendingOffsetCommit(t, e, group+"-killed", group, "tx-in", 6, "", []*kgo.Record{{Topic: "dlq", Value: []byte("x")}})
	h := echoOutput
	cfg := e.config(group, "tx-in")
	cfg.Transactions = TransactionPolicy{Enabled: true}
	cfg.CommitTimeout = time.Second
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitFor(t, "the partition started past the settled read", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Committed == 2
	}, nil)
	endTxn(t, killed, kgo.TryAbort) // as its timeout would
	waitFor(t, "every input committed", func() bool { return committedSum(e, group) == 10 }, func() string {
		return fmt.Sprintf("%+v; %+v; %q", c.Stats().Transactions, c.Stats().Partitions, c.Health().Reasons)
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	checkOutputs(t, readOutputs(t, e, "tx-out", true), []string{"a", "b"}, 5, 1, nil)
}
