package hashring

import (
	"math/rand/v2"
	"testing"
)

func TestJumpGoldenVectors(t *testing.T) {
	// Guava's published values for Hashing.consistentHash(i, 100).
	want := []int{0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83}
	for i, w := range want {
		if got := Jump(uint64(i), 100); got != w {
			t.Errorf("Jump(%d, 100) = %d, want %d", i, got, w)
		}
	}
	if got := Jump(2, 100001); got != 80343 {
		t.Errorf("Jump(2, 100001) = %d, want 80343", got)
	}
}

func TestJumpBadBuckets(t *testing.T) {
	for _, n := range []int{0, -1, -100} {
		if got := Jump(42, n); got != -1 {
			t.Errorf("Jump(42, %d) = %d, want -1", n, got)
		}
	}
	if got := Jump(42, 1); got != 0 {
		t.Errorf("Jump(42, 1) = %d, want 0", got)
	}
}

// TestJumpBalance: over 100k random session IDs and 16 buckets, the fullest
// bucket holds at most 1.05x the mean.
func TestJumpBalance(t *testing.T) {
	const keys, buckets, bound = 100_000, 16, 1.05
	counts := make([]int, buckets)
	for _, k := range randomKeys(keys, 1) {
		counts[Jump(Sum64(k), buckets)]++
	}
	if r := maxOverMean(counts); r > bound {
		t.Fatalf("max/mean = %.3f, want <= %.2f (counts %v)", r, bound, counts)
	}
}

// TestJumpMovement: growing 10 → 11 buckets moves about 1/11 of the keys,
// every moved key lands in the new bucket, and shrinking back restores all.
func TestJumpMovement(t *testing.T) {
	const keys = 100_000
	moved := 0
	for _, k := range randomKeys(keys, 2) {
		h := Sum64(k)
		a, b := Jump(h, 10), Jump(h, 11)
		if a != b {
			moved++
			if b != 10 {
				t.Fatalf("key %q moved %d → %d, not into the new bucket", k, a, b)
			}
		}
	}
	frac := float64(moved) / keys
	if frac < 0.8/11 || frac > 1.2/11 {
		t.Fatalf("moved fraction %.4f, want about 1/11 = %.4f", frac, 1.0/11)
	}
}

func TestSum64Golden(t *testing.T) {
	// Pinned so that a change of session hash (which would remap every
	// session to a different shard) is caught.
	cases := map[string]uint64{
		"":        0xef46db3751d8e999,
		"session": 0xc0e74e0b57eb1331,
	}
	for k, want := range cases {
		if got := Sum64(k); got != want {
			t.Errorf("Sum64(%q) = %#x, want %#x", k, got, want)
		}
		if got := Sum64Bytes([]byte(k)); got != want {
			t.Errorf("Sum64Bytes(%q) = %#x, want %#x", k, got, want)
		}
	}
}

func randomKeys(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]string, n)
	for i := range out {
		out[i] = randString(rng)
	}
	return out
}

func randString(rng *rand.Rand) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 8+rng.IntN(16))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func maxOverMean(counts []int) float64 {
	sum, mx := 0, 0
	for _, c := range counts {
		sum += c
		mx = max(mx, c)
	}
	return float64(mx) / (float64(sum) / float64(len(counts)))
}
