package consumer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTxns writes one transaction per entry of commit to topic through
// a transactional producer, each of per records keyed by sessions in turn:
// committed ones with values "session|seq" (seq counts a session's
// committed records), aborted ones with values "aborted|n". A topic of one
// partition ends at len(commit) × (per + 1): every transaction leaves a
// marker (a control record) after its records.
func (e *env) produceTxns(topic string, sessions []string, per int, commit ...bool) {
	e.t.Helper()
	cl := e.client(kgo.TransactionalID("txn-" + topic))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	seqs := map[string]int{}
	for i, ok := range commit {
		if err := cl.BeginTransaction(); err != nil {
			e.t.Fatalf("begin transaction %d: %v", i, err)
		}
		recs := make([]*kgo.Record, per)
		for j := range recs {
			s := sessions[(i*per+j)%len(sessions)]
			v := "aborted|" + strconv.Itoa(i*per+j)
			if ok {
				v = s + "|" + strconv.Itoa(seqs[s])
				seqs[s]++
			}
			recs[j] = &kgo.Record{Topic: topic, Key: []byte(s), Value: []byte(v)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			e.t.Fatalf("produce transaction %d: %v", i, err)
		}
		end := kgo.TryAbort
		if ok {
			end = kgo.TryCommit
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			e.t.Fatalf("end transaction %d: %v", i, err)
		}
	}
}

// committedAt returns group's committed offset of topic's partition 0, -1
// when there is none.
func (e *env) committedAt(group, topic string) int64 {
	e.t.Helper()
	cl := e.client()
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		e.t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	if o, ok := offs.Lookup(topic, 0); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// TestTransactionalUpstream: a topic written by a transactional producer
// (6 transactions of 10 records over 5 sessions, one partition: it ends at
// offset 66, after the last transaction's marker). Every committed record
// is handled once, in session order, by New and by NewBatch; no aborted
// one is handled, also when an aborted transaction is the last thing in the
// partition; the Filter never sees a marker, and no marker counts as
// processed, filtered or skipped; and the group's commit reaches the
// partition's end, past the markers and the aborted records, not one short
// of it.
func TestTransactionalUpstream(t *testing.T) {
	const all, mid, last = "committed", "aborted in the middle", "aborted last"
	txns := map[string][]bool{
		all:  {true, true, true, true, true, true},
		mid:  {true, false, true, true, true, true},
		last: {true, true, true, true, true, false},
	}
	for _, tc := range []struct {
		txns  string
		batch bool
	}{{all, false}, {mid, false}, {last, false}, {all, true}, {last, true}} {
		name := tc.txns
		if tc.batch {
			name = "batch/" + name
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1, "txns")
			sessions := sessionNames(5)
			commit := txns[tc.txns]
			e.produceTxns("txns", sessions, 10, commit...)
			committed := 0
			for _, ok := range commit {
				if ok {
					committed += 10
				}
			}
			const end = 66
			ends, err := kadm.NewClient(e.client()).ListEndOffsets(context.Background(), "txns")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := ends.Lookup("txns", 0); o.Offset != end {
				t.Fatalf("the topic ends at %d, want %d (6 transactions of 10 records and their markers)", o.Offset, end)
			}

			cfg := e.config("g-txn", "txns")
			var markers atomic.Int64 // control records the Filter saw
			cfg.Filter = func(r *kgo.Record) bool {
				if r.Attrs.IsControl() {
					markers.Add(1)
				}
				return true
			}
			rec := newRecorder(committed, nil)
			var c *Consumer
			if tc.batch {
				cfg.MaxBatch = 4
				br := &batchRecorder{recorder: rec, max: cfg.MaxBatch}
				c, err = NewBatch(cfg, br)
			} else {
				c, err = New(cfg, rec)
			}
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			rec.wait(t)
			waitFor(t, "the commit at the partition's end", func() bool { return e.committedAt("g-txn", "txns") == end },
				func() string { return "committed " + strconv.FormatInt(e.committedAt("g-txn", "txns"), 10) })
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := e.committedAt("g-txn", "txns"); got != end {
				t.Fatalf("committed %d after the shutdown, want %d", got, end)
			}

			checkOrder(t, rec, []string{"txns"}, sessions, committed/len(sessions))
			calls := rec.snapshot()
			for _, cl := range calls {
				if cl.session == "aborted" {
					t.Errorf("an aborted record was handled: offset %d", cl.offset)
				}
			}
			if len(calls) != committed {
				t.Errorf("%d handler calls, want %d: each committed record once", len(calls), committed)
			}
			st := c.Stats()
			if n := markers.Load(); n != 0 {
				t.Errorf("the Filter saw %d transaction markers", n)
			}
			if st.Processed != int64(committed) || st.Filtered != 0 || st.SkippedDone != 0 {
				t.Errorf("Stats: processed %d, filtered %d, skipped done %d; want %d, 0, 0",
					st.Processed, st.Filtered, st.SkippedDone, committed)
			}
		})
	}
}
