package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionalUpstream: a topic written by a transactional producer,
// as Kafka Streams or Debezium with exactly-once write it: 40 transactions
// of 50 records over 100 sessions and 4 partitions, about a quarter of them
// aborted, the last one aborted, produced while the member consumes. Every
// committed record is handled once, in session order (the ledger); no
// aborted record is handled; and the group's lag is 0 at the end: its
// commit passes the transaction markers (control records) and the aborted
// records, on every partition, also where an abort marker is the last
// thing in it.
func TestTransactionalUpstream(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 4)
	l := lanestest.NewLedger()
	start := time.Now()
	var aborted atomic.Int64 // aborted records handled
	group := groupName("txn")
	h := l.Handler("m1", consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if strings.HasPrefix(string(m.Record.Value), "aborted|") {
			aborted.Add(1)
			return nil
		}
		return faulty(faults{transient: 0.05}).Handle(ctx, m)
	}))
	m := startMember(t, "m1", c.consumerConfig("txn", topic, dlq), h)

	committed := c.produceTxns(t, topic, sessionNames(100), 40, 50, l)
	waitFinished(t, l, committed, 3*time.Minute)
	waitLagZero(t, c, group, topic, 2*time.Minute)
	if err := m.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if lag := groupLag(t, c, group, topic); lag != "" {
		t.Fatalf("after the shutdown: %s", lag)
	}
	if n := aborted.Load(); n > 0 {
		t.Errorf("%d records of aborted transactions were handled", n)
	}
	r := l.Report()
	assertClean(t, c, r, time.Since(start), false)
	if r.Duplicates > 0 || r.DeadLettered > 0 {
		t.Fatalf("each committed record must be handled once: %s", r)
	}
}

// produceTxns writes txns transactions of per records each through a
// transactional producer, keyed by sessions chosen at random, with the
// Kafka partitioner: about a quarter aborted, and the last. A committed
// record carries "session|seq" (seq counts the session's committed
// records) and its event ID, and is recorded in l once its transaction
// committed; an aborted one carries "aborted|n". It returns how many
// records were committed.
func (c *cluster) produceTxns(t *testing.T, topic string, sessions []string, txns, per int, l *lanestest.Ledger) int {
	t.Helper()
	cl := c.client(t, kgo.TransactionalID(fmt.Sprintf("%s-txn", topic)), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 33))
	seqs := map[string]int{}
	committed := 0
	for i := 0; i < txns; i++ {
		commit := i < txns-1 && rng.IntN(4) > 0
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin transaction %d: %v", i, err)
		}
		type sent struct {
			session string
			seq     int
			id      string
		}
		var acked []sent
		recs := make([]*kgo.Record, per)
		for j := range recs {
			s := sessions[rng.IntN(len(sessions))]
			r := &kgo.Record{Key: []byte(s), Value: []byte("aborted|" + strconv.Itoa(i*per+j))}
			id := eventid.New()
			if commit {
				seq := seqs[s]
				seqs[s]++
				id = eventid.ForSequence(s, uint64(seq))
				r.Value = []byte(s + "|" + strconv.Itoa(seq))
				acked = append(acked, sent{s, seq, id})
			}
			eventid.Stamp(r, id, s)
			recs[j] = r
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce transaction %d: %v", i, err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
		for _, a := range acked {
			l.Acked(a.session, a.seq, a.id)
		}
		committed += len(acked)
	}
	t.Logf("%d of %d transactions committed, %d records", committed/per, txns, committed)
	return committed
}

// groupLag returns "" when group's committed offset of every partition of
// topic is the partition's end offset, else what differs.
func groupLag(t *testing.T, c *cluster, group, topic string) string {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Sprintf("end offsets: %v", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Sprintf("committed offsets: %v", err)
	}
	var lags []string
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup(topic, e.Partition)
		if !ok || o.Err != nil || o.At != e.Offset {
			lags = append(lags, fmt.Sprintf("partition %d: committed %d (%v), end %d", e.Partition, o.At, o.Err, e.Offset))
		}
	})
	return strings.Join(lags, "; ")
}

// waitLagZero polls the group's commits (they have no signal of their own)
// until its lag on topic is 0, or fails after limit.
func waitLagZero(t *testing.T, c *cluster, group, topic string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		lag := groupLag(t, c, group, topic)
		if lag == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's lag is not 0 after %v: %s", limit, lag)
		}
		time.Sleep(100 * time.Millisecond) // polling interval: a commit has no signal
	}
}
