package consumer

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkParkedSessionMemory measures what a parked session costs in the
// parked set beyond its records' contents: its entry, one parked record's
// bookkeeping, and its floor (the key itself not counted). 10,000
// sessions, one parked record each; reported as B/session. A benchmark,
// not a test: the heap is only quiet enough to measure when nothing else
// runs.
func BenchmarkParkedSessionMemory(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("chat-%05d", i)
	}
	var per float64
	for range b.N {
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
		per = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
		runtime.KeepAlive(ps)
	}
	b.ReportMetric(per, "B/session")
}
