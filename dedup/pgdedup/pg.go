package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lanesdev/lanes/dedup"
)

// Config configures a [Store]. The zero value of every field except Pool
// means its documented default.
type Config struct {
	// Pool is the connection pool. Required. The store does not close it.
	Pool *pgxpool.Pool
	// Table is the table's name, optionally schema-qualified
	// ("dedup.events"). Default: [DefaultTable].
	Table string
	// DoneTTL is how long an event is remembered as done; Purge deletes
	// rows older than that. Default: [DefaultDoneTTL].
	DoneTTL time.Duration
}

// Defaults applied by New to zero fields.
const (
	DefaultTable   = "lanes_dedup"
	DefaultDoneTTL = 7 * 24 * time.Hour
)

// ErrConfig is wrapped by every error New returns for a bad Config; the
// message names the field.
var ErrConfig = errors.New("pgdedup: bad config")

// Store is a dedup.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	cfg   Config
	table string // quoted
	owned bool   // the pool was created by Connect: Close closes it
}

var _ dedup.Store = (*Store)(nil)

// New returns a store over cfg.Pool. It does not create the table (see
// CreateTable). It returns an error wrapping ErrConfig that names a bad
// field.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("%w: Pool: required", ErrConfig)
	}
	if cfg.DoneTTL < 0 {
		return nil, fmt.Errorf("%w: DoneTTL: must not be negative, got %v", ErrConfig, cfg.DoneTTL)
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.DoneTTL == 0 {
		cfg.DoneTTL = DefaultDoneTTL
	}
	parts := strings.Split(cfg.Table, ".")
	for _, p := range parts {
		if p == "" || len(parts) > 2 {
			return nil, fmt.Errorf("%w: Table: %q is not a name or schema.name", ErrConfig, cfg.Table)
		}
	}
	return &Store{cfg: cfg, table: pgx.Identifier(parts).Sanitize()}, nil
}

// Connect returns a store on a new pool for the PostgreSQL at dsn, with
// the other settings of cfg, and creates its table if it does not exist.
// Close closes the pool.
func Connect(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	p, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgdedup: connect: %w", err)
	}
	cfg.Pool = p
	s, err := New(cfg)
	if err == nil {
		err = s.CreateTable(ctx)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("pgdedup: connect: %w", err)
	}
	s.owned = true
	return s, nil
}

// Close closes the pool if Connect created it; otherwise it does nothing.
func (s *Store) Close() {
	if s.owned {
		s.cfg.Pool.Close()
	}
}

// CreateTable creates the table if it does not exist.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.cfg.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	group_id   text        NOT NULL,
	event_id   text        NOT NULL,
	done       boolean     NOT NULL,
	token      text        NOT NULL DEFAULT '',
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (group_id, event_id))`)
	if err != nil {
		return fmt.Errorf("pgdedup: create table %s: %w", s.table, err)
	}
	return nil
}

// Purge deletes the rows that expired (done marks older than DoneTTL,
// claims past their TTL) and returns how many.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	tag, err := s.cfg.Pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE expires_at <= clock_timestamp()`)
	if err != nil {
		return 0, fmt.Errorf("pgdedup: purge %s: %w", s.table, err)
	}
	return tag.RowsAffected(), nil
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// Claim implements dedup.Store.
func (s *Store) Claim(ctx context.Context, group, id, token string, ttl time.Duration) (dedup.State, error) {
	claim := `INSERT INTO ` + s.table + ` AS d (group_id, event_id, done, token, expires_at)
	VALUES ($1, $2, false, $3, clock_timestamp() + $4 * interval '1 microsecond')
	ON CONFLICT (group_id, event_id) DO UPDATE
	SET done = false, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
	WHERE d.expires_at <= clock_timestamp() OR (NOT d.done AND d.token = EXCLUDED.token)
	RETURNING true`
	for range 3 { // the row can be released between the INSERT and the SELECT
		var ok, done bool
		err := s.cfg.Pool.QueryRow(ctx, claim, group, id, token, micros(ttl)).Scan(&ok)
		if err == nil {
			return dedup.Claimed, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("pgdedup: claim %s/%s: %w", group, id, err)
		}
		err = s.cfg.Pool.QueryRow(ctx, `SELECT done FROM `+s.table+` WHERE group_id = $1 AND event_id = $2`,
			group, id).Scan(&done)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case err != nil:
			return 0, fmt.Errorf("pgdedup: claim %s/%s: %w", group, id, err)
		case done:
			return dedup.Done, nil
		}
		return dedup.Busy, nil
	}
	return dedup.Busy, nil
}

// markDone is the done mark: it inserts the row or turns a claim (or an
// expired mark) into a fresh mark, and returns no row when the event was
// done already.
func (s *Store) markDone() string {
	return `INSERT INTO ` + s.table + ` AS d (group_id, event_id, done, token, expires_at)
	VALUES ($1, $2, true, '', clock_timestamp() + $3 * interval '1 microsecond')
	ON CONFLICT (group_id, event_id) DO UPDATE
	SET done = true, token = '', expires_at = EXCLUDED.expires_at
	WHERE NOT d.done OR d.expires_at <= clock_timestamp()
	RETURNING true`
}

// Done implements dedup.Store.
func (s *Store) Done(ctx context.Context, group, id string) error {
	if _, err := s.cfg.Pool.Exec(ctx, s.markDone(), group, id, micros(s.cfg.DoneTTL)); err != nil {
		return fmt.Errorf("pgdedup: mark %s/%s done: %w", group, id, err)
	}
	return nil
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, group, id, token string) error {
	_, err := s.cfg.Pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE group_id = $1 AND event_id = $2 AND NOT done AND token = $3`,
		group, id, token)
	if err != nil {
		return fmt.Errorf("pgdedup: release %s/%s: %w", group, id, err)
	}
	return nil
}
