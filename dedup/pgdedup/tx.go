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

// TxConfig configures a [TxHandler]. The zero value of every field except
// Group means its documented default.
type TxConfig struct {
	// Group names whose events these are, as dedup.Config.Group. Required.
	Group string
	// Key returns the event ID to mark done, or "" when the message has
	// none: NoEventID then decides. Default: dedup.EventKey.
	Key func(*consumer.Message) string
	// NoEventID is what happens to a message without a key, as in
	// dedup.Config. Default (the zero value): dedup.RefuseNoEventID, a
	// permanent error wrapping dedup.ErrNoEventID (dead-lettered). With
	// dedup.RunWithoutDedup the handler's writes commit without a mark:
	// at least once, not exactly once.
	NoEventID dedup.NoEventIDPolicy
}

// TxHandler is a consumer.Handler that applies a TxFunc's writes exactly
// once per event ID of its group: see the package documentation.
type TxHandler struct {
	s                              *Store
	cfg                            TxConfig
	fn                             TxFunc
	ran, skipped, storeErr         atomic.Int64
	refused, unguarded, byPosition atomic.Int64
}

// TxHandler returns a handler that runs fn and marks the event done (keyed
// by cfg.Group and cfg.Key) in one transaction. An error from fn rolls both
// back and is returned as it is (retried, or dead-lettered when
// consumer.Permanent); a failure to begin, mark or commit wraps
// dedup.ErrStore (retried). A panic in fn rolls both back and goes on to
// the consumer, which counts it and retries. It returns an error wrapping
// ErrConfig that names a bad field.
func (s *Store) TxHandler(cfg TxConfig, fn TxFunc) (*TxHandler, error) {
	switch {
	case cfg.Group == "":
		return nil, fmt.Errorf("%w: TxConfig.Group: required", ErrConfig)
	case fn == nil:
		return nil, fmt.Errorf("%w: TxHandler: fn: required", ErrConfig)
	case !cfg.NoEventID.Valid():
		return nil, fmt.Errorf("%w: TxConfig.NoEventID: unknown policy %d: use dedup.RefuseNoEventID, RunWithoutDedup or KeyByPosition",
			ErrConfig, int(cfg.NoEventID))
	}
	if cfg.Key == nil {
		cfg.Key = dedup.EventKey
	}
	return &TxHandler{s: s, cfg: cfg, fn: fn}, nil
}

// Handle implements consumer.Handler.
func (h *TxHandler) Handle(ctx context.Context, m *consumer.Message) error {
	id, err := h.key(m)
	if err != nil {
		return err
	}
	tx, err := h.s.cfg.Pool.Begin(ctx)
	if err != nil {
		h.storeErr.Add(1)
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
	if id != "" { // "": RunWithoutDedup, no mark
		var marked bool
		err = tx.QueryRow(ctx, h.s.markDone(), h.cfg.Group, id, micros(h.s.cfg.DoneTTL)).Scan(&marked)
		if errors.Is(err, pgx.ErrNoRows) { // done: a committed transaction applied it
			h.skipped.Add(1)
			return nil
		}
		if err != nil {
			h.storeErr.Add(1)
			return fmt.Errorf("%w: mark %s/%s: %w", dedup.ErrStore, h.cfg.Group, id, err)
		}
	}
	if err := h.fn(ctx, tx, m); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		// Committed or not, a retry finds out: it skips a committed mark.
		h.storeErr.Add(1)
		return fmt.Errorf("%w: commit %s/%s: %w", dedup.ErrStore, h.cfg.Group, id, err)
	}
	if id != "" {
		h.ran.Add(1)
	}
	return nil
}

// key returns m's key, or what NoEventID makes of a message without one,
// as dedup's middleware does.
func (h *TxHandler) key(m *consumer.Message) (string, error) {
	if id := h.cfg.Key(m); id != "" {
		return id, nil
	}
	id, err := h.cfg.NoEventID.Key(m)
	switch {
	case err != nil:
		h.refused.Add(1)
	case id == "":
		h.unguarded.Add(1)
	default:
		h.byPosition.Add(1)
	}
	return id, err
}

// Stats returns the counts so far, in dedup's terms: Ran counts the
// transactions that committed with their mark, Skipped the deliveries that
// found their event done, StoreErrors the attempts failed on PostgreSQL
// (begin, mark or commit), Refused, RanWithoutDedup (attempts) and
// KeyedByPosition the messages without a key. Waited and MarkErrors stay 0:
// a transaction waits on the mark's row lock, and its mark commits with
// the effect.
func (h *TxHandler) Stats() dedup.Stats {
	return dedup.Stats{Ran: h.ran.Load(), Skipped: h.skipped.Load(), StoreErrors: h.storeErr.Load(),
		Refused: h.refused.Load(), RanWithoutDedup: h.unguarded.Load(), KeyedByPosition: h.byPosition.Load()}
}
