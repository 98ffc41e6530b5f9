package consumer

import (
	"context"
	"strconv"
	"time"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/tracing"
	"go.opentelemetry.io/otel/trace"
)

// A record finishing in the transactional mode (tx.go says how the mode
// works): its outputs stamped and handed to the open transaction, and its
// offset marked done, under the transaction's shared lock.

// finish ends w's record in its partition (done: handled, or its
// dead-letter copy is its output). With transactions on, it does so under
// the transaction's shared lock, producing the record's outputs into the
// open transaction first, as a drain does while the partition is fenced
// by a revoke or the shutdown (the transaction commits with the shutdown,
// and aborts after a revoke); unless the partition was rewound after an
// abort: then its outputs are dropped and it stays undone, and its
// partition's next take-up handles it again.
//
// While a transaction ends, a record finishing does not wait: it is kept
// (in order) and finished into the next transaction as soon as it began,
// before any record that finishes after the end (txEnd: finishKept).
func (c *Consumer) finish(w *work, done bool) {
	if c.tx == nil {
		w.p.finish(w.seq, done)
		return
	}
	c.finishInTx(w, done)
}

// finishInTx is finish with transactions on.
func (c *Consumer) finishInTx(w *work, done bool) {
	t := c.tx
	t.keptMu.Lock()
	if t.ending {
		if w.p.isFenced() { // revoked, lost, rewound or shutting down: left undone now, for its next owner (a revoke's drain waits for it)
			t.keptMu.Unlock()
			w.msg.out = nil
			w.p.finish(w.seq, false)
			return
		}
		t.kept = append(t.kept, keptFinish{w, done})
		t.keptN++
		t.keptMu.Unlock()
		return
	}
	t.keptMu.Unlock()
	t.mu.RLock()
	defer t.mu.RUnlock()
	c.finishTx(w, done)
}

// finishTx finishes w's record under the transaction's lock, shared or
// alone.
func (c *Consumer) finishTx(w *work, done bool) {
	t := c.tx
	if w.p.rewound || w.p.isReleased() {
		done = false // rewound, or released by a revoke or a loss (a handler that outlasted its drain): its transaction aborted, a later one must not carry its outputs
	}
	if done && w.msg.out != nil {
		if w.msg.out.refused != nil { // its dead-letter copy: its input is forgotten once this transaction commits
			t.refusals.deadRefused(w.rec)
		}
		c.stampOutputs(w)
		for _, r := range w.msg.out.recs {
			t.sess.Produce(context.Background(), r, t.refused)
		}
		t.outputs.Add(int64(len(w.msg.out.recs)))
		t.held.Add(int64(len(w.msg.out.recs)))
	}
	w.msg.out = nil
	w.p.finish(w.seq, done)
}

// finishKept finishes, in the order they came, the records kept while the
// transaction ended (t.mu held alone): into the transaction that began,
// or, when none did (the shutdown's), undone (their next owner handles
// them). Records that finish from here on are not kept.
func (c *Consumer) finishKept(began bool) {
	t := c.tx
	t.keptMu.Lock()
	defer t.keptMu.Unlock()
	for _, k := range t.kept {
		c.finishTx(k.w, k.done && began)
	}
	clear(t.kept)
	t.kept, t.ending = t.kept[:0], false
}

// stampOutputs names, on each of w's outputs, its input and its place
// (HeaderInput, HeaderOutput), and the trace context of the attempt that
// made it, unless the handler set one: a reader's span links to it.
func (c *Consumer) stampOutputs(w *work) {
	outs := w.msg.out.recs
	if len(outs) == 0 {
		return
	}
	in := inputName(w.rec)
	n := "/" + strconv.Itoa(len(outs))
	var ctx context.Context
	if w.msg.out.span.IsValid() {
		ctx = trace.ContextWithSpanContext(context.Background(), w.msg.out.span)
	}
	prop := c.tracer.Propagator()
	for k, r := range outs {
		eventid.SetHeader(r, HeaderInput, in)
		eventid.SetHeader(r, HeaderOutput, strconv.Itoa(k)+n)
		if ctx != nil && tracing.NewCarrier(r).Get("traceparent") == "" {
			prop.Inject(ctx, tracing.NewCarrier(r))
		}
	}
}

func (c *Consumer) txStats() TxStats {
	t := c.tx
	if t == nil {
		return TxStats{}
	}
	return TxStats{Committed: t.committed.Load(), Aborted: t.aborted.Load(), Outputs: t.outputs.Load(),
		Rewinds: t.rewinds.Load(), Rejoins: t.rejoinCount.Load(), EndTime: time.Duration(t.endNanos.Load())}
}
