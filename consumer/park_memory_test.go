package consumer

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestParkedSessionMemory measures what a parked session costs in the
// parked set beyond its records' contents: its entry, its session key and
// one parked record's bookkeeping, and its floor. 10,000 sessions, one
// parked record each.
func TestParkedSessionMemory(t *testing.T) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("chat-%05d", i) // allocated before the measurement: lanes clones the key it parks
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps := newParkSet(parkRules{delay: time.Second, maxDelay: time.Minute, maxAttempts: 3})
	now := time.Now()
	for i, k := range keys {
		ps.add(k, int64(i), int64(i), nil, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d parked sessions: %.0f bytes each (entry, one record's bookkeeping, floor; the record's contents not counted)", n, per)
	if per > 400 {
		t.Fatalf("%.0f bytes per parked session; want at most 400", per)
	}
	runtime.KeepAlive(ps)
}
