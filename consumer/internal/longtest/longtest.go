// Package longtest is the quick and the full form of the consumer
// module's tests. `make test` runs go test -short: a test cut from the
// quick form skips there (Only) or runs a smaller size (Size). `make
// test-long` runs those tests at full size, by name (LONG_TESTS in the
// Makefile), and .ci/run runs both targets, so nothing cut from the quick
// form leaves CI. A test that calls these must be named in LONG_TESTS:
// make test exports the list as LANES_LONG_TESTS, and a test cut from the
// quick form that the list does not name fails.
//
// Only tests import it.
package longtest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Only skips t under -short; what says what the quick form leaves out.
func Only(t testing.TB, what string) {
	t.Helper()
	mustBeLong(t)
	if testing.Short() {
		t.Skipf("%s: skipped with -short (make test); make test-long runs it", what)
	}
}

// Size is full, or quick under -short.
func Size[T any](t testing.TB, full, quick T) T {
	t.Helper()
	mustBeLong(t)
	if testing.Short() {
		return quick
	}
	return full
}

// mustBeLong fails t, cut from the quick form, when the Makefile's
// LONG_TESTS (exported by make test as LANES_LONG_TESTS) does not name its
// top-level test: make test-long would not run it at full size.
func mustBeLong(t testing.TB) {
	t.Helper()
	list := os.Getenv("LANES_LONG_TESTS")
	if list == "" {
		return
	}
	re, err := regexp.Compile(list)
	if err != nil {
		t.Fatalf("LANES_LONG_TESTS %q: %v", list, err)
	}
	if top, _, _ := strings.Cut(t.Name(), "/"); !re.MatchString(top) {
		t.Fatalf("%s is cut from the quick form (-short), but LONG_TESTS in the Makefile does not name it: make test-long would never run it at full size", top)
	}
}
