package hashring

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

// maglev is the Maglev lookup table (Eisenbud et al., NSDI 2016), kept here
// only as the measured alternative to the vnode ring: it is faster and more
// even, but a membership change also moves a few keys between members that
// did not change, which the vnode ring never does. See
// https://github.com/lanesdev/lanes/blob/main/docs/hashring.md.
type maglev struct {
	members []string
	table   []int32
}

func newMaglev(members []string, size int) *maglev {
	m := &maglev{members: members, table: make([]int32, size)}
	for i := range m.table {
		m.table[i] = -1
	}
	next := make([]uint64, len(members))
	offset := make([]uint64, len(members))
	skip := make([]uint64, len(members))
	for i, name := range members {
		offset[i] = xxhash.Sum64String(name) % uint64(size)
		skip[i] = xxhash.Sum64String(name+"#skip")%uint64(size-1) + 1
	}
	for filled := 0; filled < size; {
		for i := range members {
			c := (offset[i] + next[i]*skip[i]) % uint64(size)
			for m.table[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % uint64(size)
			}
			m.table[c] = int32(i)
			next[i]++
			if filled++; filled == size {
				break
			}
		}
	}
	return m
}

func (m *maglev) get(h uint64) string { return m.members[m.table[h%uint64(len(m.table))]] }

// TestMaglevComparison logs the balance and movement of the Maglev table
// next to the vnode ring for the same members and keys, the figures behind
// the choice in
// https://github.com/lanesdev/lanes/blob/main/docs/hashring.md, and checks
// the Maglev table is sound.
func TestMaglevComparison(t *testing.T) {
	keys := randomKeys(100_000, 8)
	ms := members(10)
	a, b := newMaglev(ms, 65537), newMaglev(append(members(10), "worker-new"), 65537)
	idx := map[string]int{}
	for i, m := range ms {
		idx[m] = i
	}
	counts := make([]int, len(ms))
	moved, movedElsewhere := 0, 0
	for _, k := range keys {
		h := Sum64(k)
		x, y := a.get(h), b.get(h)
		counts[idx[x]]++
		if x != y {
			moved++
			if y != "worker-new" {
				movedElsewhere++
			}
		}
	}
	t.Logf("maglev 10 members: max/mean %.3f; add 11th: %.4f moved, %.4f between unchanged members",
		maxOverMean(counts), float64(moved)/float64(len(keys)), float64(movedElsewhere)/float64(len(keys)))
	if r := maxOverMean(counts); r > 1.1 {
		t.Fatalf("maglev max/mean %.3f", r)
	}
}
