//go:build unix

package consumer

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used, user and system: the
// broker's in-process share included, the same for every consumer measured.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
