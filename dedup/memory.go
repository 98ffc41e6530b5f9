package dedup

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryConfig configures a [Memory] store. The zero value is valid.
type MemoryConfig struct {
	// MaxEntries bounds the keys held (claims and done marks); the least
	// recently written one is dropped to make room, and a dropped done
	// mark no longer stops a redelivery. Default: [DefaultMaxEntries].
	MaxEntries int
	// DoneTTL is how long an event is remembered as done. Default:
	// [DefaultMemoryDoneTTL].
	DoneTTL time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Defaults of MemoryConfig.
const (
	DefaultMaxEntries    = 100_000
	DefaultMemoryDoneTTL = time.Hour
)

// Memory is a [Store] in this process: bounded (MaxEntries) and with a TTL,
// for tests and for a single instance whose dedup need not survive a
// restart of the process. It is safe for concurrent use.
type Memory struct {
	cfg     MemoryConfig
	mu      sync.Mutex
	entries map[memKey]*list.Element // of *memEntry
	order   *list.List               // least recently written first
}

type memKey struct{ group, id string }

type memEntry struct {
	key     memKey
	token   string // "" once done
	done    bool
	expires time.Time
}

// NewMemory returns an empty in-memory store. It returns an error wrapping
// ErrConfig that names a bad field.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	switch {
	case cfg.MaxEntries < 0:
		return nil, fmt.Errorf("%w: MaxEntries: must not be negative, got %d", ErrConfig, cfg.MaxEntries)
	case cfg.DoneTTL < 0:
		return nil, fmt.Errorf("%w: DoneTTL: must not be negative, got %v", ErrConfig, cfg.DoneTTL)
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.DoneTTL == 0 {
		cfg.DoneTTL = DefaultMemoryDoneTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Memory{cfg: cfg, entries: map[memKey]*list.Element{}, order: list.New()}, nil
}

// Claim implements [Store].
func (s *Memory) Claim(_ context.Context, group, id, token string, ttl time.Duration) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	k := memKey{group, id}
	if e := s.live(k, now); e != nil {
		if e.done {
			return Done, nil
		}
		if e.token != token {
			return Busy, nil
		}
	}
	s.put(&memEntry{key: k, token: token, expires: now.Add(ttl)}, now)
	return Claimed, nil
}

// Done implements [Store].
func (s *Memory) Done(_ context.Context, group, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	s.put(&memEntry{key: memKey{group, id}, done: true, expires: now.Add(s.cfg.DoneTTL)}, now)
	return nil
}

// Release implements [Store].
func (s *Memory) Release(_ context.Context, group, id, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{group, id}
	if el, ok := s.entries[k]; ok {
		if e := el.Value.(*memEntry); !e.done && e.token == token {
			s.order.Remove(el)
			delete(s.entries, k)
		}
	}
	return nil
}

// Len returns how many keys the store holds, expired ones not yet dropped
// included.
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// live returns k's entry unless it is absent or expired.
func (s *Memory) live(k memKey, now time.Time) *memEntry {
	el, ok := s.entries[k]
	if !ok {
		return nil
	}
	if e := el.Value.(*memEntry); now.Before(e.expires) {
		return e
	}
	return nil
}

// put writes e as the most recent entry, then drops expired entries from
// the old end and the oldest ones beyond MaxEntries.
func (s *Memory) put(e *memEntry, now time.Time) {
	if el, ok := s.entries[e.key]; ok {
		s.order.Remove(el)
	}
	s.entries[e.key] = s.order.PushBack(e)
	for front := s.order.Front(); front != nil; front = s.order.Front() {
		old := front.Value.(*memEntry)
		if len(s.entries) <= s.cfg.MaxEntries && now.Before(old.expires) {
			return
		}
		s.order.Remove(front)
		delete(s.entries, old.key)
	}
}
