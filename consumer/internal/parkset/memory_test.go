package parkset

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkParkedSessionMemory measures what parked sessions cost in the
// parked set: 10,000 sessions, each with its key (cloned, as a lane's
// parking does) and one parked record, reported as B/session; then a
// second parked record each, reported as B/record. The records' contents
// are not in the set (a retry reads its head back from the park
// partition). A benchmark, not a test: the heap is only quiet enough to
// measure when nothing else runs.
func BenchmarkParkedSessionMemory(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("chat-%05d", i)
	}
	var perSession, perRecord float64
	for range b.N {
		before := heapAlloc()
		ps := New(Rules{Delay: time.Second, MaxDelay: time.Minute, MaxAttempts: 3}, "")
		now := time.Now()
		for i, k := range keys {
			ps.Add(strings.Clone(k), int64(i), int64(i), now)
		}
		one := heapAlloc()
		for i, k := range keys {
			ps.Add(k, int64(n+i), int64(n+i), now)
		}
		two := heapAlloc()
		if ps.records != 2*n || ps.Counts(now).Sessions != n {
			b.Fatalf("%d records of %d sessions parked, want %d of %d", ps.records, ps.Counts(now).Sessions, 2*n, n)
		}
		perSession, perRecord = (one-before)/n, (two-one)/n
		runtime.KeepAlive(ps)
	}
	b.ReportMetric(perSession, "B/session")
	b.ReportMetric(perRecord, "B/record")
}

// heapAlloc is the live heap after a collection, in bytes.
func heapAlloc() float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}
