package breaker

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The suite has a quick form and a full one, as the consumer's
// (consumer/long_test.go). `make test` runs go test -short: a test cut
// from the quick form runs a smaller size there (quickSize). `make
// test-long` runs those tests at full size, by name (LONG_TESTS in the
// Makefile, which runs every package under consumer/). A test that calls
// quickSize must be named in LONG_TESTS: make test exports the list as
// LANES_LONG_TESTS, and a test cut from the quick form that the list does
// not name fails.

// quickSize is full, or quick under -short.
func quickSize[T any](t *testing.T, full, quick T) T {
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
