package longtest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSize: the quick size under -short, the full one otherwise; a test
// the list names passes the check.
func TestSize(t *testing.T) {
	t.Setenv("LANES_LONG_TESTS", "^TestSize$")
	want := 10
	if testing.Short() {
		want = 1
	}
	if got := Size(t, 10, 1); got != want {
		t.Fatalf("Size = %d, want %d (short %v)", got, want, testing.Short())
	}
}
