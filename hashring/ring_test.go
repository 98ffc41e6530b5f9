package hashring

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("worker-%03d", i)
	}
	return out
}

func mustRing(t testing.TB, cfg RingConfig, ms ...string) *Ring {
	t.Helper()
	r, err := NewRing(cfg, ms...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRingBalance: 100k random keys over 10 members with the default 256
// virtual nodes; the fullest member holds at most 1.2x the mean.
func TestRingBalance(t *testing.T) {
	const bound = 1.2
	ms := members(10)
	r := mustRing(t, RingConfig{}, ms...)
	idx := map[string]int{}
	for i, m := range ms {
		idx[m] = i
	}
	counts := make([]int, len(ms))
	for _, k := range randomKeys(100_000, 3) {
		m, err := r.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		counts[idx[m]]++
	}
	ratio := maxOverMean(counts)
	t.Logf("ring balance, 10 members, 256 vnodes: max/mean %.3f", ratio)
	if ratio > bound {
		t.Fatalf("max/mean = %.3f, want <= %.2f (%v)", ratio, bound, counts)
	}
}

// TestRingMovement: adding an 11th member moves about 1/11 of the keys, all
// to the new member; removing it moves exactly those keys back.
func TestRingMovement(t *testing.T) {
	keys := randomKeys(100_000, 4)
	r := mustRing(t, RingConfig{}, members(10)...)
	before := lookupAll(t, r, keys)
	if err := r.Add("worker-new"); err != nil {
		t.Fatal(err)
	}
	after := lookupAll(t, r, keys)
	moved := 0
	for i := range keys {
		if before[i] != after[i] {
			moved++
			if after[i] != "worker-new" {
				t.Fatalf("key %q moved %s → %s, not to the new member", keys[i], before[i], after[i])
			}
		}
	}
	frac := float64(moved) / float64(len(keys))
	t.Logf("add 11th member: %.4f of keys moved (ideal %.4f)", frac, 1.0/11)
	if frac < 0.6/11 || frac > 1.4/11 {
		t.Fatalf("moved fraction %.4f, want about 1/11", frac)
	}
	if err := r.Remove("worker-new"); err != nil {
		t.Fatal(err)
	}
	back := lookupAll(t, r, keys)
	for i := range keys {
		if back[i] != before[i] {
			t.Fatalf("key %q: %s after remove, %s before add", keys[i], back[i], before[i])
		}
	}
}

func lookupAll(t *testing.T, r *Ring, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		m, err := r.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = m
	}
	return out
}

// TestRingGolden pins placements so a change of hash or ring layout, which
// would move every session in production, is caught.
func TestRingGolden(t *testing.T) {
	r := mustRing(t, RingConfig{}, "a", "b", "c")
	for k, m := range ringGolden {
		if got, _ := r.Get(k); got != m {
			t.Errorf("Get(%q) = %q, want %q", k, got, m)
		}
	}
}

var ringGolden = map[string]string{
	"chat-1": "a",
	"chat-2": "c",
	"chat-3": "c",
	"chat-4": "b",
	"chat-5": "c",
	"chat-6": "c",
	"":       "b",
}

func TestRingBadInput(t *testing.T) {
	r := mustRing(t, RingConfig{})
	if _, err := r.Get("k"); !errors.Is(err, ErrEmptyRing) {
		t.Errorf("Get on empty ring: %v, want ErrEmptyRing", err)
	}
	if _, err := r.Assign("k"); !errors.Is(err, ErrEmptyRing) {
		t.Errorf("Assign on empty ring: %v, want ErrEmptyRing", err)
	}
	if err := r.Add(""); !errors.Is(err, ErrEmptyMember) {
		t.Errorf("Add(\"\"): %v, want ErrEmptyMember", err)
	}
	if err := r.Add("a", "a"); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("Add(a, a): %v, want ErrDuplicateMember", err)
	}
	if r.Len() != 0 {
		t.Errorf("failed Add changed the ring: %v", r.Members())
	}
	if err := r.Add("a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("a"); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("second Add(a): %v, want ErrDuplicateMember", err)
	}
	if err := r.Remove("zz"); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("Remove(zz): %v, want ErrUnknownMember", err)
	}
	if m, err := r.Get(""); err != nil || m != "a" {
		t.Errorf("Get(\"\") = %q, %v; the empty key is a valid key", m, err)
	}
	for _, cfg := range []RingConfig{{VirtualNodes: -1}, {LoadFactor: -0.5}} {
		if _, err := NewRing(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewRing(%+v): %v, want ErrBadConfig", cfg, err)
		}
	}
}

// TestRingBoundedLoad: with ε = 0.25, no member ever holds more than
// ceil(1.25·mean) pinned keys, choices stay fixed while pinned, and Release
// frees capacity.
func TestRingBoundedLoad(t *testing.T) {
	const eps = 0.25
	ms := members(8)
	r := mustRing(t, RingConfig{LoadFactor: eps}, ms...)
	keys := randomKeys(4000, 5)
	first := map[string]string{}
	for i, k := range keys {
		m, err := r.Assign(k)
		if err != nil {
			t.Fatal(err)
		}
		first[k] = m
		limit := int(ceil((1 + eps) * float64(i+1) / float64(len(ms))))
		for _, mm := range ms {
			if l := r.Load(mm); l > limit {
				t.Fatalf("after %d keys member %s holds %d > limit %d", i+1, mm, l, limit)
			}
		}
	}
	if err := r.Add("late-member"); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if m, _ := r.Assign(k); m != first[k] {
			t.Fatalf("pinned key %q moved %s → %s after Add", k, first[k], m)
		}
	}
	for _, k := range keys {
		r.Release(k)
	}
	r.Release("never-assigned")
	for _, m := range append(ms, "late-member") {
		if l := r.Load(m); l != 0 {
			t.Fatalf("member %s load %d after releasing all", m, l)
		}
	}
}

func ceil(f float64) float64 {
	i := float64(int(f))
	if f > i {
		return i + 1
	}
	return i
}

// TestRingConcurrent runs lookups while members come and go; -race checks
// the copy-on-write publication, and every lookup must name a member.
func TestRingConcurrent(t *testing.T) {
	r := mustRing(t, RingConfig{VirtualNodes: 32}, members(5)...)
	keys := randomKeys(1000, 6)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m, err := r.Get(keys[i%len(keys)])
				if err != nil || m == "" {
					t.Errorf("Get during churn: %q, %v", m, err)
					return
				}
				if _, err := r.Assign(keys[i%len(keys)]); err != nil {
					t.Errorf("Assign during churn: %v", err)
					return
				}
				r.Release(keys[i%len(keys)])
			}
		}()
	}
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("churn-%d", i)
		if err := r.Add(name); err != nil {
			t.Fatal(err)
		}
		if err := r.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
