//go:build !unix

package consumer

import (
	"testing"
	"time"
)

// processCPU is not measured here: the cpu-ns/msg metric reads 0.
func processCPU(*testing.B) time.Duration { return 0 }
