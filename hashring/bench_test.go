package hashring

import (
	"fmt"
	"testing"
)

func BenchmarkSum64(b *testing.B) {
	b.ReportAllocs()
	var sink uint64
	for i := 0; i < b.N; i++ {
		sink += Sum64("chat-session-0001234")
	}
	_ = sink
}

func BenchmarkJump(b *testing.B) {
	for _, n := range []int{16, 1000} {
		b.Run(fmt.Sprintf("buckets=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			sink := 0
			for i := 0; i < b.N; i++ {
				sink += Jump(uint64(i)*0x9e3779b97f4a7c15, n)
			}
			_ = sink
		})
	}
}

// BenchmarkRingGet measures the production ring (virtual nodes with a direct
// index) against a Maglev lookup table of the same members, in one run.
func BenchmarkRingGet(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		r := mustRing(b, RingConfig{}, members(n)...)
		b.Run(fmt.Sprintf("vnode/members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := r.GetHash(uint64(i) * 0x9e3779b97f4a7c15); err != nil {
					b.Fatal(err)
				}
			}
		})
		m := newMaglev(members(n), 65537)
		b.Run(fmt.Sprintf("maglev/members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = m.get(uint64(i) * 0x9e3779b97f4a7c15)
			}
		})
	}
}

func BenchmarkRingAdd(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			r := mustRing(b, RingConfig{}, members(n)...)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = r.Add("extra")
				_ = r.Remove("extra")
			}
		})
	}
}

func BenchmarkRingAssign(b *testing.B) {
	r := mustRing(b, RingConfig{LoadFactor: 0.25}, members(100)...)
	keys := randomKeys(1024, 7)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		if _, err := r.Assign(k); err != nil {
			b.Fatal(err)
		}
		r.Release(k)
	}
}
