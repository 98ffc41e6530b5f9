package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txSide is a --transactions run's handler: the output topic, the plain
// producer of the run without transactions (nil: Message.Output), when
// the sending began, and the handler's figures.
type txSide struct {
	w     workload
	l     *lanestest.Ledger
	names []string
	out   string
	plain *kgo.Client
	began atomic.Int64 // the first send, Unix ns

	mu       sync.Mutex
	lat      []time.Duration // send to handler done
	inWindow int             // messages handled while the sending lasted
}

func newTxSide(w workload, out string) *txSide {
	return &txSide{w: w, l: lanestest.NewLedger(), names: sessionNames(w.Sessions), out: out}
}

// handle works the message, then outputs a copy of it, keyed by its
// session: produced and acknowledged before it returns without
// transactions (the at-least-once pipeline's way), added to the message's
// outputs with them. A failed produce fails the attempt (retried).
func (s *txSide) handle(ctx context.Context, m *consumer.Message) error {
	sleepWork(s.w.Work)
	r := &kgo.Record{Topic: s.out, Key: m.Record.Key, Value: m.Record.Value}
	if s.plain != nil {
		if err := s.plain.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("bench: output: %w", err)
		}
	} else if err := m.Output(r); err != nil {
		return err
	}
	at, ok := sentAt(m.Record.Value)
	if !ok {
		return nil
	}
	done := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat = append(s.lat, done.Sub(at))
	if done.Sub(time.Unix(0, s.began.Load())) <= s.w.Duration {
		s.inWindow++
	}
	return nil
}

// sentAt is the send time sendPaced wrote into a value
// ("session|seq|Unix ns").
func sentAt(v []byte) (time.Time, bool) {
	i := strings.LastIndexByte(string(v), '|')
	ns, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
	return time.Unix(0, ns), i > 0 && err == nil
}

// result sums a run up: the handler's and the watcher's figures, the
// transactional mode's counts and the ledger's verdict on every message.
// Redeliveries (a transaction's rewind handles its inputs again) are
// counted, not failed.
func (s *txSide) result(arm string, every time.Duration, watch *txWatch, tx consumer.TxStats, stderr io.Writer) TxResult {
	rep := s.l.Report()
	for i, d := range rep.Details {
		if i == 10 {
			fmt.Fprintf(stderr, "  %s: … %d more\n", arm, len(rep.Details)-i)
			break
		}
		fmt.Fprintf(stderr, "  %s: %s\n", arm, d)
	}
	r := TxResult{Run: arm, Every: every, Committed: tx.Committed, Aborted: tx.Aborted, Outputs: tx.Outputs,
		Rewinds: tx.Rewinds, Redelivered: rep.Redeliveries, Regressions: rep.Regressions, Violations: rep.Violations,
		Overlaps: rep.Overlaps, Lost: rep.Lost, Elapsed: time.Since(time.Unix(0, s.began.Load()))}
	if tx.Committed > 0 {
		r.MeanEnd = tx.EndTime / time.Duration(tx.Committed)
	}
	s.mu.Lock()
	r.HandledRate = float64(s.inWindow) / s.w.Duration.Seconds()
	r.HandledP99 = quantile(s.lat, 0.99)
	s.mu.Unlock()
	watch.sum(&r)
	r.Finished = r.Lost == 0 && r.Missing == 0
	return r
}

// txWatch reads a run's output topic at read_committed while the run
// lasts and times each output from its input's send to the fetch that
// returned it: what a downstream reader of the pipeline waits.
type txWatch struct {
	cl    *kgo.Client
	w     workload
	began atomic.Int64 // the first send, Unix ns
	n     atomic.Int64 // inputs with an output read

	mu         sync.Mutex
	seen       map[string]int // "session|seq" → outputs read
	last       map[string]int // session → the highest seq read
	lat        []time.Duration
	inWindow   int // inputs whose output was read while the sending lasted
	twice      int // outputs read again
	outOfOrder int // outputs read after a later one of their session
}

func newTxWatch(broker *lanestest.Broker, topic string, w workload) (*txWatch, error) {
	// the fetch waits at most 100 ms: a broker that answers a
	// read_committed fetch only when it times out adds no more than that
	cl, err := broker.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("output reader: %w", err)
	}
	return &txWatch{cl: cl, w: w, seen: map[string]int{}, last: map[string]int{}}, nil
}

func (t *txWatch) close() { t.cl.Close() }

func (t *txWatch) visible() int { return int(t.n.Load()) }

// run reads until ctx ends.
func (t *txWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := t.cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) { t.add(r.Value, now) })
	}
}

func (t *txWatch) add(v []byte, now time.Time) {
	session, rest, _ := strings.Cut(string(v), "|")
	seqText, _, _ := strings.Cut(rest, "|")
	seq, err := strconv.Atoi(seqText)
	at, ok := sentAt(v)
	if err != nil || !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	id := session + "|" + seqText
	if t.seen[id]++; t.seen[id] > 1 {
		t.twice++
		return
	}
	if last, ok := t.last[session]; ok && seq < last {
		t.outOfOrder++
	}
	t.last[session] = max(t.last[session], seq)
	t.lat = append(t.lat, now.Sub(at))
	if now.Sub(time.Unix(0, t.began.Load())) <= t.w.Duration {
		t.inWindow++
	}
	t.n.Add(1)
}

// sum sets r's visibility figures.
func (t *txWatch) sum(r *TxResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Rate = float64(t.inWindow) / t.w.Duration.Seconds()
	r.P99 = quantile(t.lat, 0.99)
	r.Visible, r.VisibleTwice, r.OutOfOrder = len(t.seen), t.twice, t.outOfOrder
	r.Missing = max(0, t.w.Messages-len(t.seen))
}

// checkOutputs adds a read_committed reading of the whole output topic
// after the run (lanestest.ReadOutputs) to r: every one of inputs'
// outputs once, whole, in input order, each marked with its input.
func (r *TxResult) checkOutputs(rep lanestest.OutputReport, inputs int) {
	r.Missing = max(r.Missing, inputs-len(rep.Inputs))
	r.Finished = r.Finished && r.Missing == 0
	if err := rep.Err(); err != nil {
		r.OutputErr = err.Error()
	} else if rep.Unmarked > 0 {
		r.OutputErr = fmt.Sprintf("%d outputs without lanes' output headers", rep.Unmarked)
	}
}
