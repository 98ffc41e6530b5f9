package redisdedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lanesdev/lanes/dedup"
	"github.com/redis/go-redis/v9"
)

// Config configures a [Store]. The zero value of every field except Client
// means its documented default.
type Config struct {
	// Client is the Redis client (a *redis.Client, *redis.ClusterClient
	// or ring). Required. The store does not close it.
	Client redis.UniversalClient
	// Prefix starts every key the store writes. Default: [DefaultPrefix].
	Prefix string
	// DoneTTL is how long an event is remembered as done. Default:
	// [DefaultDoneTTL].
	DoneTTL time.Duration
}

// Defaults applied by New to zero fields.
const (
	DefaultPrefix  = "lanes:dedup:"
	DefaultDoneTTL = 7 * 24 * time.Hour
)

// ErrConfig is wrapped by every error New returns for a bad Config; the
// message names the field.
var ErrConfig = errors.New("redisdedup: bad config")

const (
	doneValue   = "done"
	claimPrefix = "claim:"
)

// release deletes the key only if the caller's claim still holds it.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Store is a dedup.Store on Redis. It is safe for concurrent use.
type Store struct {
	cfg   Config
	owned bool // the client was created by Connect: Close closes it
}

// Connect returns a store on a new client for the Redis at addr
// (host:port), with the other settings of cfg, once the server answers a
// PING. Close closes the client.
func Connect(ctx context.Context, addr string, cfg Config) (*Store, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	cfg.Client = c
	s, err := New(cfg)
	if err == nil {
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redisdedup: connect to %s: %w", addr, err)
	}
	s.owned = true
	return s, nil
}

// Close closes the client if Connect created it; otherwise it does
// nothing.
func (s *Store) Close() error {
	if s.owned {
		return s.cfg.Client.Close()
	}
	return nil
}

var _ dedup.Store = (*Store)(nil)

// New returns a store over cfg.Client. It does not connect. It returns an
// error wrapping ErrConfig that names a bad field.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client: required", ErrConfig)
	}
	if cfg.DoneTTL < 0 {
		return nil, fmt.Errorf("%w: DoneTTL: must not be negative, got %v", ErrConfig, cfg.DoneTTL)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.DoneTTL == 0 {
		cfg.DoneTTL = DefaultDoneTTL
	}
	return &Store{cfg: cfg}, nil
}

// key is prefix, the group's length, the group and the event ID: no two
// (group, id) pairs share a key whatever characters they hold.
func (s *Store) key(group, id string) string {
	return s.cfg.Prefix + strconv.Itoa(len(group)) + ":" + group + ":" + id
}

// Claim implements dedup.Store: SET NX with the claim's TTL; when the key
// exists, its value says done, busy, or the caller's own claim.
func (s *Store) Claim(ctx context.Context, group, id, token string, ttl time.Duration) (dedup.State, error) {
	k, mine := s.key(group, id), claimPrefix+token
	for range 3 { // the key can expire between SET NX and GET
		ok, err := s.cfg.Client.SetNX(ctx, k, mine, ttl).Result()
		if err != nil {
			return 0, fmt.Errorf("redisdedup: claim %s: %w", k, err)
		}
		if ok {
			return dedup.Claimed, nil
		}
		v, err := s.cfg.Client.Get(ctx, k).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			return 0, fmt.Errorf("redisdedup: claim %s: %w", k, err)
		case v == doneValue:
			return dedup.Done, nil
		case v == mine: // the caller's own claim, still live
			return dedup.Claimed, nil
		}
		return dedup.Busy, nil
	}
	return dedup.Busy, nil
}

// Done implements dedup.Store.
func (s *Store) Done(ctx context.Context, group, id string) error {
	k := s.key(group, id)
	if err := s.cfg.Client.Set(ctx, k, doneValue, s.cfg.DoneTTL).Err(); err != nil {
		return fmt.Errorf("redisdedup: mark %s done: %w", k, err)
	}
	return nil
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, group, id, token string) error {
	k := s.key(group, id)
	if err := release.Run(ctx, s.cfg.Client, []string{k}, claimPrefix+token).Err(); err != nil {
		return fmt.Errorf("redisdedup: release %s: %w", k, err)
	}
	return nil
}
