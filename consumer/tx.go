package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/hashring"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional mode (Config.Transactions,
// https://github.com/lanesdev/lanes/blob/main/docs/exactly-once.md). The
// member's group client is a franz-go GroupTransactSession. A handler's
// outputs wait with its message until it returns; a record done is
// finished (finish) under the transaction's shared lock: its outputs are
// produced into the open transaction and its offset marked done together.
// Once per CommitInterval the poll loop, between two polls and before it
// allows a rebalance (so no revoke runs meanwhile), takes the lock alone
// and ends the transaction (txEnd) with the partitions' watermarks and
// completed-offset metadata as its offset commit, then begins the next.
// So a transaction's offsets cover exactly the inputs whose outputs it
// holds.
//
// A transaction that does not commit (an output refused, a revoke or a
// lost partition since it began, a commit refused, the member fenced) is
// aborted: every owned partition is fenced under the lock, so no record
// finishes into the next transaction, then rewound (txRewind): its
// handlers drained, its state read again from the group's commit, its
// fetch position set there. What the aborted transaction held is handled
// again, its outputs produced again, once.

// txOpts are the group client's options for the transactional mode,
// under transactional ID id.
func (c *Consumer) txOpts(id string) []kgo.Opt {
	p := c.cfg.Transactions
	return []kgo.Opt{
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(p.Timeout),
		kgo.RecordPartitioner(hashring.Partitioner(p.Outputs)),
	}
}

// openTx makes the group client a transactional session and begins its
// first transaction.
func (c *Consumer) openTx(opts []kgo.Opt) (*kgo.Client, error) {
	cl, s, err := c.newTxSession(opts, c.tx.currentID())
	if err != nil {
		return nil, err
	}
	c.tx.sess, c.tx.due = s, time.Now().Add(c.cfg.CommitInterval)
	return cl, nil
}

// newTxSession makes a transactional session under transactional ID id
// and begins its first transaction.
func (c *Consumer) newTxSession(opts []kgo.Opt, id string) (*kgo.Client, *kgo.GroupTransactSession, error) {
	s, err := kgo.NewGroupTransactSession(append(opts, c.txOpts(id)...)...)
	if err != nil {
		return nil, nil, err
	}
	if err := s.Begin(); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("begin the first transaction (transactional ID %q): %w", id, err)
	}
	return s.Client(), s, nil
}

// txTick ends the open transaction and begins the next when it is due;
// the poll loop calls it between polls, before allowing a rebalance.
func (c *Consumer) txTick(ctx context.Context) {
	if t := c.tx; t != nil && (!time.Now().Before(t.due) || t.moved.Load()) {
		c.txEnd(ctx, true)
		t.due = time.Now().Add(c.cfg.CommitInterval)
	}
}

// pollCtx is the context of one poll: with transactions on, it ends when
// the open transaction is due to end, or at once after a rebalance since
// it began (rebalanced cuts the poll under way, and may have found the
// last one's cancel: either it sees this poll's, or this poll sees moved).
func (c *Consumer) pollCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.tx == nil {
		return ctx, func() {}
	}
	pctx, cancel := context.WithDeadline(ctx, c.tx.due)
	c.tx.stopPoll.Store(&cancel)
	if c.tx.moved.Load() {
		cancel()
	}
	return pctx, cancel
}

// txEnd ends the open transaction, committing it with every owned
// partition's commit point when it can, and begins the next unless the
// member is shutting down (next false). One that does not commit is
// rewound (txRewind). It reports whether it committed.
func (c *Consumer) txEnd(ctx context.Context, next bool) bool {
	t := c.tx
	t.keptMu.Lock()
	t.ending = true // records finishing from here on wait in t.kept, not on the lock
	t.keptMu.Unlock()
	t.mu.Lock()
	parts := c.own.all()
	points, meta := c.commitPoints(parts)
	if len(points) == 0 && t.held.Load() == 0 && t.failed.Load() == nil && !t.moved.Load() && !t.open {
		// Nothing to end: the open transaction holds nothing yet (the
		// broker knows nothing of it). Ending it would cost franz-go 500
		// ms when it sent no offsets (a shutdown's, an idle interval's).
		c.finishKept(next)
		t.mu.Unlock()
		return true
	}
	t.held.Store(0)
	t.moved.Store(false)
	start := time.Now()
	// Not cut by the shutdown's cancellation: an End cut short leaves the
	// transaction open (below).
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	// Every output's answer first: franz-go's End commits a transaction
	// in which an output was refused (its batch failed, the others and
	// the offsets commit), so it is told to abort when one was
	// (TestTransactionsRefusedOutput lost a session's outputs without
	// it). A flush cut short is End's to report.
	_ = t.sess.Client().Flush(ectx)
	try := kgo.TryCommit
	failed := t.failed.Swap(nil)
	if n, unnamed := t.refusals.settleRefused(func(topic string) (int, bool) { return c.outputLimit(ctx, topic) }); len(unnamed) > 0 {
		c.log().Warn().Int("refused", n).Strs("topics", unnamed).Str("transactional_id", t.currentID()).
			Msg("outputs refused for their size though none is larger than its topic's max.message.bytes alone: the producer's batches are; " +
				"set kgo.ProducerBatchMaxBytes (Config.ClientOptions) at most the smallest max.message.bytes of these topics")
	}
	if failed != nil || t.open {
		try = kgo.TryAbort
	}
	ectx = kgo.PreTxnCommitFnContext(ectx, func(req *kmsg.TxnOffsetCommitRequest) error {
		txOffsets(req, meta)
		return nil
	})
	committed, err := t.sess.End(ectx, try)
	cancel()
	t.open = false
	if err != nil {
		// franz-go's End returns at once when its Flush (or
		// AbortBufferedRecords) fails, without ending the transaction:
		// it is still open with this interval's outputs. Abort it now, or
		// the next End commits them beside the outputs of the same inputs
		// handled again after the rewind (found by review:
		// TestTransactionsEndCutShort).
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
		_, aerr := t.sess.End(actx, kgo.TryAbort)
		acancel()
		t.open = aerr != nil
		t.stuck(aerr)
	}
	t.refusals.endedRefused(committed)
	if committed {
		t.committed.Add(1) // counted before the partitions say so: Stats never shows a commit not counted
		t.rejoinN = 0
		t.endNanos.Add(time.Since(start).Nanoseconds())
		c.metrics.commitDone(time.Since(start))
		for p, cp := range points {
			p.committedAt(cp)
		}
	} else {
		t.aborted.Add(1)
		for _, p := range parts {
			p.rewound = true // nothing of them finishes into the next transaction
			p.stopStarting()
		}
	}
	t.noteEnd(committed, c.logTxAbort(committed, failed, err, len(parts)), time.Now())
	var berr error
	if next && !t.open {
		berr = t.sess.Begin()
		t.noteBegin(berr, time.Now())
		t.stuck(berr)
	}
	if berr != nil && committed { // nothing can finish into a transaction: as after an abort
		for _, p := range parts {
			p.rewound = true
			p.stopStarting()
		}
	}
	c.finishKept(next && berr == nil)
	t.mu.Unlock()
	if berr != nil {
		c.log().Error().Err(berr).Str("transactional_id", t.currentID()).
			Msg("cannot begin the next transaction: nothing this member handles commits (its readiness says so); after three failures in a row it leaves its group and joins again with a new producer; if another process uses the same transactional ID, give each its own")
	}
	if next && (!committed || berr != nil) && t.fatal == nil { // fatal: the rejoin drains and releases them (tx_rejoin.go)
		c.txRewind(ctx, parts)
	}
	return committed
}

// commitPoints is the commit point of each of parts that moved since its
// last commit, and its metadata by partition.
func (c *Consumer) commitPoints(parts []*partition) (map[*partition]commitPoint, map[partKey]commitPoint) {
	metaMax := c.cfg.MaxCommitMetadataBytes
	if c.cfg.DisableCompletedOffsets {
		metaMax = 0
	}
	points := map[*partition]commitPoint{}
	byKey := map[partKey]commitPoint{}
	for _, p := range parts {
		if cp, ok := p.toCommit(metaMax); ok {
			points[p], byKey[p.key] = cp, cp
		}
	}
	return points, byKey
}

// txOffsets makes the transaction's offset commit lanes' own: each
// partition's watermark and completed-offset metadata (points) in place
// of franz-go's fetch positions. A partition with no point is left out:
// its commit stands. Topic IDs are kept from franz-go's request.
func txOffsets(req *kmsg.TxnOffsetCommitRequest, points map[partKey]commitPoint) {
	ids := map[string][16]byte{}
	for _, t := range req.Topics {
		ids[t.Topic] = t.TopicID
	}
	byTopic := map[string][]kmsg.TxnOffsetCommitRequestTopicPartition{}
	for k, cp := range points {
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = k.partition, cp.offset, -1, &cp.meta
		byTopic[k.topic] = append(byTopic[k.topic], p)
	}
	req.Topics = req.Topics[:0]
	for topic, ps := range byTopic {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID, t.Partitions = topic, ids[topic], ps
		req.Topics = append(req.Topics, t)
	}
}

// txRewind takes parts, fenced by an aborted transaction, up again from
// the group's commit, as a new assignment would: their running handlers
// drained (as a revoke's are), their offsets, completed offsets and
// growth read again, and their fetch positions set to where they start.
// It runs on the poll loop, between polls.
func (c *Consumer) txRewind(ctx context.Context, parts []*partition) {
	if len(parts) == 0 {
		return
	}
	t := c.tx
	t.rewinds.Add(1)
	c.drainRevoked(ctx, parts)
	c.own.release(parts)
	c.growForget(parts)
	assigned := map[string][]int32{}
	for _, p := range parts {
		assigned[p.key.topic] = append(assigned[p.key.topic], p.key.partition)
	}
	c.onAssigned(ctx, c.client.Load(), assigned)
	set := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range c.own.lookup(assigned) {
		if at, ok := p.startOffset(); ok {
			if set[p.key.topic] == nil {
				set[p.key.topic] = map[int32]kgo.EpochOffset{}
			}
			set[p.key.topic][p.key.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
		}
	}
	c.client.Load().SetOffsets(set)
}

// logTxAbort reports a transaction that did not commit (nothing when it
// did, and "" returned): failed is the output refused in it (nil: none),
// err End's error. It returns why, for the readiness reason.
func (c *Consumer) logTxAbort(committed bool, failed *error, err error, parts int) string {
	if committed {
		return ""
	}
	ev := c.log().Warn().Str("transactional_id", c.tx.currentID()).Int("partitions", parts)
	unread := failed != nil && errors.Is(*failed, errCommitUnread)
	switch {
	case unread:
		ev = ev.AnErr("read_error", *failed)
	case failed != nil:
		ev = ev.AnErr("output_error", *failed)
	}
	if err != nil {
		ev = ev.Err(err)
	}
	why := "a rebalance or a lost partition since it began"
	switch {
	case unread:
		why = "a partition's group commit could not be read"
	case failed != nil:
		why = "an output was refused"
	case errors.Is(err, context.DeadlineExceeded):
		why = "ending it timed out (CommitTimeout)"
	case err != nil:
		why = "the commit failed"
	}
	ev.Msg("transaction aborted (" + why + "): its outputs are not visible to read_committed readers; " +
		"its partitions restart from the group's last commit and handle those records again")
	return why
}

// finalCommit is the shutdown's commit of owned: with transactions, the
// open transaction's end, committing what the drain finished; nothing
// when the shutdown came while the member waited to join again
// (tx_rejoin.go: it owns nothing, its producer is fenced).
func (c *Consumer) finalCommit(ctx context.Context, owned []*partition) error {
	if c.tx == nil {
		return c.commit(ctx, owned)
	}
	if c.tx.fatal != nil {
		return nil
	}
	if !c.txEnd(ctx, false) {
		return fmt.Errorf("%w: the final transaction did not commit; the next owner handles its records again", ErrCommit)
	}
	return nil
}

// outputLimit is the size a batch holding one output to topic may have:
// the smaller of the topic's max.message.bytes and the group client's
// ProducerBatchMaxBytes; ok false when the topic's could not be read
// within limitTimeout (its own deadline: it must not eat into an End's).
func (c *Consumer) outputLimit(ctx context.Context, topic string) (int, bool) {
	cl := c.client.Load()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(limitTimeout, c.cfg.CommitTimeout))
	defer cancel()
	n, ok := maxMessageBytes(lctx, kadm.NewClient(cl), topic)
	if !ok {
		return 0, false
	}
	return batchLimit(cl, n), true
}

// limitTimeout bounds the read of an output topic's limit (once per topic,
// after an output to it is refused for its size).
const limitTimeout = 2 * time.Second
