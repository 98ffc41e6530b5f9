package consumer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
// after each failure) with its first transaction begun, and only then
// given the consumed topics (so a client that could not begin never joins
// the group). It reports false when ctx ended first: the poll loop then
// ends, t.fatal set (Run returns an error wrapping ErrFenced), and the
// shutdown leaves the group.
func (c *Consumer) txRejoin(ctx context.Context) bool {
	t := c.tx
	parts := c.own.all()
	// Not cut by the shutdown: its own drain (drainOnStop) cancels the
	// handlers within ShutdownTimeout, and this one then returns.
	c.drainRevoked(context.WithoutCancel(ctx), parts)
	c.own.release(parts)
	c.growForget(parts)
	if ctx.Err() != nil {
		return false // the shutdown leaves the group (shutdown.go)
	}
	old := c.client.Load()
	old.AllowRebalance()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LeaveTimeout)
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
	refusedN := 0 // the new ID refused by the broker's ACLs
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
		cl, s, cancelCl, err := c.openRejoin(ctx, id)
		if err == nil {
			c.swapClient(old, cl, s, cancelCl, id)
			return true
		}
		t.fatal = fmt.Errorf("%w: %w", ErrFenced, err)
		t.rejoinN++
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			refusedN++
		}
		if refusedN >= txStuckLimit && id != c.cfg.Transactions.ID {
			// ACLs on the configured ID alone (not a prefix): join under it,
			// fencing the other process in turn.
			id = c.cfg.Transactions.ID
		}
	}
}

// openRejoin makes the rejoining member's client under transactional ID
// id, with no consumed topic yet, and begins its first transaction; a
// shutdown (ctx) cuts it short.
func (c *Consumer) openRejoin(ctx context.Context, id string) (*kgo.Client, *kgo.GroupTransactSession, context.CancelFunc, error) {
	cctx, ccancel := context.WithCancel(c.clientCtx)
	stop := context.AfterFunc(ctx, ccancel)
	cl, s, err := c.newTxSession(append(c.groupOpts(), kgo.WithContext(cctx)), id)
	if !stop() || err != nil { // ctx ended (the client's context with it), or it failed
		ccancel()
		if err == nil {
			s.Close()
			err = ctx.Err()
		}
		return nil, nil, nil, err
	}
	return cl, s, ccancel, nil
}

// swapClient makes cl (with its session s, under transactional ID id,
// and cancelCl ending its context) the member's group client in place of
// old, which it closes, starts the
// transactional state afresh, and only then gives cl the consumed topics:
// it joins the group, and its callbacks find it the member's client.
func (c *Consumer) swapClient(old, cl *kgo.Client, s *kgo.GroupTransactSession, cancelCl context.CancelFunc, id string) {
	t := c.tx
	cancelOld := t.cancelCl
	t.mu.Lock() // no record finishes into the old session from here on
	t.sess, t.due, t.fatal, t.stuckN, t.open = s, time.Now().Add(c.cfg.CommitInterval), nil, 0, false
	t.failed.Store(nil)
	t.held.Store(0)
	t.mu.Unlock()
	c.client.Store(cl)
	c.flow.setClient(cl)
	old.CloseAllowingRebalance()
	old.AllowRebalance() // as at the shutdown (shutdown.go): Close's own leave must not wait for a poll
	if cancelOld != nil {
		cancelOld()
	}
	t.cancelCl = cancelCl
	t.moved.Store(false) // the old client's revoke, if any came with its leave or close
	t.rejoinCount.Add(1)
	t.noteRejoined(id)
	cl.AddConsumeTopics(c.cfg.Topics...)
	c.log().Info().Str("group", c.cfg.Group).Str("transactional_id", id).Int64("rejoins", t.rejoinCount.Load()).
		Msg("transactional member joined its group again with a new producer")
}
