package dedup

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/consumer"
)

// Config configures a [Dedup]. The zero value of every field except Store
// means its documented default.
type Config struct {
	// Store keeps the claims and done marks. Required.
	Store Store
	// Group names whose events these are, so that two groups reading one
	// topic each apply every event. Default: the consumer group of each
	// message (Message.Group), which is what a service wants unless two
	// groups must share their marks (a blue/green pair of groups that must
	// not both apply an event: give both the same Group).
	Group string
	// ClaimTTL is how long a claim holds the event against other
	// attempts. Keep it above the consumer's HandlerTimeout: a claim that
	// expires while its handler runs lets another member run the event
	// too. After a crash mid-handler, a redelivery waits this long for the
	// dead claim. Default: [DefaultClaimTTL].
	ClaimTTL time.Duration
	// WaitInterval is how often an attempt that found the event claimed by
	// another checks it again. Default: [DefaultWaitInterval].
	WaitInterval time.Duration
	// MarkTimeout bounds marking an event done after its handler
	// succeeded, and releasing the claim after it failed; both run even
	// when the attempt's context has ended. Default: [DefaultMarkTimeout].
	MarkTimeout time.Duration
	// Key returns the event ID to deduplicate on, or "" when the message
	// has none: NoEventID then decides. Default: [EventKey].
	Key func(*consumer.Message) string
	// NoEventID is what happens to a message without a key. Default (the
	// zero value): [RefuseNoEventID], a permanent error wrapping
	// [ErrNoEventID] that sends it to the dead-letter topic.
	NoEventID NoEventIDPolicy
}

// Defaults applied by New to zero fields.
const (
	DefaultClaimTTL     = 2 * consumer.DefaultHandlerTimeout
	DefaultWaitInterval = 100 * time.Millisecond
	DefaultMarkTimeout  = 5 * time.Second
)

// Stats counts what the middleware did since New.
type Stats struct {
	// Ran: attempts that claimed their event and called the handler.
	Ran int64
	// Skipped: deliveries of events already done; the handler was not
	// called (duplicate deliveries caught).
	Skipped int64
	// Waited: attempts that found their event claimed by another and
	// waited.
	Waited int64
	// StoreErrors: attempts failed because the store could not claim.
	StoreErrors int64
	// MarkErrors: handlers that succeeded but whose done mark (or, after a
	// failure, whose release) the store refused; a redelivery of such an
	// event runs it again once its claim expires.
	MarkErrors int64
	// Refused: attempts failed with ErrNoEventID (RefuseNoEventID): the
	// message had no key; the handler was not called.
	Refused int64
	// RanWithoutDedup: attempts of messages without a key that called the
	// handler with no claim (RunWithoutDedup).
	RanWithoutDedup int64
	// KeyedByPosition: attempts of messages without a key keyed by
	// PositionKey (KeyByPosition); they count in Ran or Skipped too.
	KeyedByPosition int64
}

// Dedup is the middleware: see the package documentation for the protocol
// and the guarantee. It is safe for concurrent use.
type Dedup struct {
	cfg                                    Config
	ran, skipped, waited, storeErr, markEr atomic.Int64
	refused, unguarded, byPosition         atomic.Int64
}

// New returns a Dedup over cfg.Store. It returns an error wrapping
// ErrConfig that names a bad field.
func New(cfg Config) (*Dedup, error) {
	bad := func(field, format string, args ...any) (*Dedup, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if cfg.Store == nil {
		return bad("Store", "required")
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ClaimTTL", &cfg.ClaimTTL, DefaultClaimTTL},
		{"WaitInterval", &cfg.WaitInterval, DefaultWaitInterval},
		{"MarkTimeout", &cfg.MarkTimeout, DefaultMarkTimeout},
	}
	for _, f := range durs {
		if *f.v < 0 {
			return bad(f.name, "must not be negative, got %v", *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if !cfg.NoEventID.Valid() {
		return bad("NoEventID", "unknown policy %d: use RefuseNoEventID, RunWithoutDedup or KeyByPosition", int(cfg.NoEventID))
	}
	if cfg.Key == nil {
		cfg.Key = EventKey
	}
	return &Dedup{cfg: cfg}, nil
}

// EventKey is the default Config.Key: the message's event ID (its
// lanes-event-id header), or "" for a message without one, which
// Config.NoEventID then decides about. It never keys a message by its
// offset: offsets are reused (see [NoEventIDPolicy]).
func EventKey(m *consumer.Message) string { return m.EventID }

// Stats returns the counts so far.
func (d *Dedup) Stats() Stats {
	return Stats{Ran: d.ran.Load(), Skipped: d.skipped.Load(), Waited: d.waited.Load(),
		StoreErrors: d.storeErr.Load(), MarkErrors: d.markEr.Load(),
		Refused: d.refused.Load(), RanWithoutDedup: d.unguarded.Load(), KeyedByPosition: d.byPosition.Load()}
}

// Middleware wraps next so that it runs once per event ID; it is a
// consumer.Middleware.
func (d *Dedup) Middleware(next consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		id, err := d.key(m)
		if err != nil {
			return err
		}
		if id == "" { // RunWithoutDedup
			return next.Handle(ctx, m)
		}
		g := cmp.Or(d.cfg.Group, m.Group)
		if g == "" {
			return fmt.Errorf("%w: Group: the message names no consumer group; set Config.Group", ErrConfig)
		}
		c := claimOf{group: g, id: id, token: newToken()}
		st, err := d.claim(ctx, c)
		if err != nil || st == Done {
			return err
		}
		d.ran.Add(1)
		return d.run(ctx, next, m, c)
	})
}

// key returns m's key: Config.Key's, or what NoEventID makes of a message
// without one ("" to run it without dedup, or the refusal).
func (d *Dedup) key(m *consumer.Message) (string, error) {
	if id := d.cfg.Key(m); id != "" {
		return id, nil
	}
	id, err := d.cfg.NoEventID.Key(m)
	switch {
	case err != nil:
		d.refused.Add(1)
	case id == "":
		d.unguarded.Add(1)
	default:
		d.byPosition.Add(1)
	}
	return id, err
}

// claimOf is one attempt's claim: the event id in group, held with token.
type claimOf struct{ group, id, token string }

// run calls next under the claim c and settles it: marked done when
// next succeeds, released when it fails or panics. A panic goes on to the
// consumer (which counts it and retries) with the claim already released:
// left behind, it would hold the retry until ClaimTTL.
func (d *Dedup) run(ctx context.Context, next consumer.Handler, m *consumer.Message, c claimOf) error {
	returned := false
	defer func() {
		if !returned { // a panic (or runtime.Goexit) unwinds through here
			d.release(ctx, c)
		}
	}()
	herr := next.Handle(ctx, m)
	returned = true
	if herr != nil {
		d.release(ctx, c)
		return herr
	}
	mctx, cancel := d.markCtx(ctx)
	defer cancel()
	if err := d.cfg.Store.Done(mctx, c.group, c.id); err != nil {
		// The effect is applied: failing the attempt would run it
		// again once the claim expires. Succeed; only a redelivery
		// (a crash before the commit) can repeat it.
		d.markEr.Add(1)
	}
	return nil
}

// release drops the claim c after its handler failed, so that the
// retry, or a replay from the dead-letter topic, runs it at once.
func (d *Dedup) release(ctx context.Context, c claimOf) {
	mctx, cancel := d.markCtx(ctx)
	defer cancel()
	if err := d.cfg.Store.Release(mctx, c.group, c.id, c.token); err != nil {
		d.markEr.Add(1) // the claim expires by itself
	}
}

// markCtx bounds a mark or a release by MarkTimeout, even after the
// attempt's context ended.
func (d *Dedup) markCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.MarkTimeout)
}

// claim takes c, waiting while another holds its event; it returns Claimed or
// Done, or an error.
func (d *Dedup) claim(ctx context.Context, c claimOf) (State, error) {
	waited := false
	for {
		st, err := d.cfg.Store.Claim(ctx, c.group, c.id, c.token, d.cfg.ClaimTTL)
		if err != nil {
			d.storeErr.Add(1)
			return 0, fmt.Errorf("%w: claim %s (group %s): %w", ErrStore, c.id, c.group, err)
		}
		switch st {
		case Claimed:
			return st, nil
		case Done:
			d.skipped.Add(1)
			return st, nil
		}
		if !waited {
			waited = true
			d.waited.Add(1)
		}
		t := time.NewTimer(d.cfg.WaitInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: %s: %w", ErrBusy, c.id, ctx.Err())
		}
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
