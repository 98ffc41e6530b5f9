package consumer

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transactional member whose producer is fenced (another process took
// its transactional ID) or that cannot begin a transaction (three times in
// a row, tx_state.go's stuck) is not left dead: it leaves its group, so
// its partitions go on elsewhere at once, and joins again as a new member
// with a new group client (franz-go's producer does not recover from a
// fence), after a backoff, within the same Run.
//
// Fenced, it joins under a new transactional ID (its configured ID, "-r"
// and a count): taking the old one back would fence the other process in
// turn, and the two would abort each other's transactions for ever (its
// transaction left open, if any, ends at its Timeout). Unable
// to begin, it keeps its ID: a producer made again under it ends the
// transaction its former self left open.

// rejoinBackoff is the wait before the n-th rejoin in a row (n from 1):
// doubling from rejoinFirst up to rejoinMax. A transaction committed ends
// the row.
func rejoinBackoff(n int) time.Duration {
	d := rejoinFirst
	for i := 1; i < n && d < rejoinMax; i++ {
		d *= 2
	}
	return min(d, rejoinMax)
}

const (
	rejoinFirst = time.Second
	rejoinMax   = 30 * time.Second
)

// txRejoin is the poll loop's answer to t.fatal: every owned partition
// drained and released, the group left, then a new client opened (again
// after each failure) with its first transaction begun. It reports false
// when ctx ended first: the poll loop then ends, t.fatal set (Run returns
// an error wrapping ErrFenced).
func (c *Consumer) txRejoin(ctx context.Context) bool {
	t := c.tx
	parts := c.own.all()
	c.drainRevoked(ctx, parts)
	c.own.release(parts)
	c.growForget(parts)
	old := c.client.Load()
	old.AllowRebalance()
	lctx, cancel := context.WithTimeout(ctx, c.cfg.LeaveTimeout)
	if err := old.LeaveGroupContext(lctx); err != nil {
		c.log().Warn().Err(err).Str("group", c.cfg.Group).
			Msg("transactional member fenced: leave group cut short; the group sees it gone at its session timeout")
	}
	cancel()
	t.rejoinN++
	id := t.currentID()
	if fencedBy(t.fatal) {
		id = fmt.Sprintf("%s-r%d-%s", c.cfg.Transactions.ID, t.rejoinCount.Load()+1, rand.Text()[:6])
	}
	for {
		wait := rejoinBackoff(t.rejoinN)
		t.noteFenced(id, time.Now().Add(wait))
		c.log().Error().Err(t.fatal).Str("group", c.cfg.Group).Str("transactional_id", t.currentID()).
			Str("next_transactional_id", id).Stringer("in", wait).Int("partitions_released", len(parts)).
			Msg("transactional member left its group: its producer is fenced or cannot begin a transaction; " +
				"it joins again as a new member (its partitions go on elsewhere meanwhile); " +
				"if another process uses the same transactional ID, give each its own (TransactionPolicy.ID)")
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		cl, s, err := c.newTxSession(c.clientOpts(), id)
		if err == nil {
			c.swapClient(old, cl, s, id)
			return true
		}
		t.fatal = fmt.Errorf("%w: %w", ErrFenced, err)
		t.rejoinN++
	}
}

// swapClient makes cl (with its session s, under transactional ID id)
// the member's group client in place of old, which it closes, and starts
// the transactional state afresh.
func (c *Consumer) swapClient(old, cl *kgo.Client, s *kgo.GroupTransactSession, id string) {
	t := c.tx
	t.mu.Lock() // no record finishes into the old session from here on
	t.sess, t.due, t.fatal, t.stuckN, t.open = s, time.Now().Add(c.cfg.CommitInterval), nil, 0, false
	t.failed.Store(nil)
	t.held.Store(0)
	t.moved.Store(false)
	t.mu.Unlock()
	c.client.Store(cl)
	c.flow.setClient(cl)
	old.CloseAllowingRebalance()
	old.AllowRebalance() // as at the shutdown (shutdown.go): Close's own leave must not wait for a poll
	t.rejoinCount.Add(1)
	t.noteRejoined(id)
	c.log().Info().Str("group", c.cfg.Group).Str("transactional_id", id).Int64("rejoins", t.rejoinCount.Load()).
		Msg("transactional member joined its group again with a new producer")
}
