package bench

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The suite has a quick form and a full one. `make test` runs go test
// -short: a test cut from the quick form skips there (longOnly). `make
// test-long` runs those tests, by name (LONG_TESTS in the Makefile), and
// .ci/run runs both targets, so nothing cut from the quick form leaves CI.
// A test that calls longOnly must be named in LONG_TESTS: make test
// exports the list as LANES_LONG_TESTS, and a test cut from the quick form
// that the list does not name fails.

// longOnly skips t under -short; what says what the quick form leaves out.
func longOnly(t *testing.T, what string) {
	t.Helper()
	mustBeLong(t)
	if testing.Short() {
		t.Skipf("%s: skipped with -short (make test); make test-long runs it", what)
	}
}

// mustBeLong fails t, cut from the quick form, when the Makefile's
// LONG_TESTS (exported by make test as LANES_LONG_TESTS) does not name its
// top-level test: make test-long would not run it at full size.
func mustBeLong(t *testing.T) {
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
