package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
)

// TxFunc is a handler that writes through tx; its writes commit together
// with the event's done mark, or not at all.
type TxFunc func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error

// TxHandler is a consumer.Handler that applies a TxFunc's writes exactly
// once per event ID of its group: see the package documentation.
type TxHandler struct {
	s            *Store
	group        string
	fn           TxFunc
	ran, skipped atomic.Int64
}

// TxHandler returns a handler that runs fn and marks the event done (keyed
// by group and dedup.EventKey) in one transaction. An error from fn rolls
// both back and is returned as it is (retried, or dead-lettered when
// consumer.Permanent); a failure to begin, mark or commit wraps
// dedup.ErrStore (retried). A panic in fn rolls both back and goes on to
// the consumer, which counts it and retries.
func (s *Store) TxHandler(group string, fn TxFunc) *TxHandler {
	return &TxHandler{s: s, group: group, fn: fn}
}

// Handle implements consumer.Handler.
func (h *TxHandler) Handle(ctx context.Context, m *consumer.Message) (err error) {
	id := dedup.EventKey(m)
	tx, err := h.s.cfg.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: begin: %w", dedup.ErrStore, err)
	}
	// Roll back unless committed: after an error, a skip, or a panic in fn
	// (which goes on to the consumer), so that neither the connection nor
	// the lock on the mark's row outlives the attempt. Rollback after
	// Commit does nothing.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedup.DefaultMarkTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	var marked bool
	err = tx.QueryRow(ctx, h.s.markDone(), h.group, id, micros(h.s.cfg.DoneTTL)).Scan(&marked)
	if errors.Is(err, pgx.ErrNoRows) { // done: a committed transaction applied it
		h.skipped.Add(1)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: mark %s/%s: %w", dedup.ErrStore, h.group, id, err)
	}
	if err = h.fn(ctx, tx, m); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		// Committed or not, a retry finds out: it skips a committed mark.
		return fmt.Errorf("%w: commit %s/%s: %w", dedup.ErrStore, h.group, id, err)
	}
	h.ran.Add(1)
	return nil
}

// Ran returns how many events' transactions committed.
func (h *TxHandler) Ran() int64 { return h.ran.Load() }

// Skipped returns how many deliveries found their event done.
func (h *TxHandler) Skipped() int64 { return h.skipped.Load() }
