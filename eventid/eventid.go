package eventid

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// ErrMalformed is returned (wrapped) by [Parse] for a string that is not a
// canonical UUID.
var ErrMalformed = errors.New("eventid: malformed event ID")

// Namespace is the UUIDv5 namespace of [ForSequence]: the SHA-1 name-based
// UUID of "https://github.com/lanesdev/lanes/eventid" in the URL namespace.
// It is a constant, fixed forever: changing it would change every
// deterministic ID.
const Namespace = "76576640-2060-56b5-a2fd-d9ad14c81461"

// namespace is Namespace parsed once.
var namespace = uuid.MustParse(Namespace)

// New returns a new UUIDv7 event ID: 48 bits of Unix milliseconds, then a
// sub-millisecond counter, then random bits. IDs from one process sort in
// creation order, also within one millisecond.
//
// If the system's random source fails (it does not on supported platforms),
// New falls back to a random UUIDv4 rather than failing the send.
func New() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// ForSequence returns the deterministic UUIDv5 event ID of message seq of
// session: the same inputs give the same ID in every process and release.
func ForSequence(session string, seq uint64) string {
	name := make([]byte, 0, len(session)+21)
	name = append(name, session...)
	name = append(name, 0) // separator: "a1"+seq 2 differs from "a"+seq 12
	name = strconv.AppendUint(name, seq, 10)
	return uuid.NewSHA1(namespace, name).String()
}

// Parse checks that s is a UUID in canonical form
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, either case) and returns it
// lower-cased. Any other form, including braces, URNs and the 32-digit form
// without dashes, is rejected with an error wrapping [ErrMalformed].
func Parse(s string) (string, error) {
	if len(s) != 36 {
		return "", fmt.Errorf("%w: %q: want 36 characters, got %d", ErrMalformed, truncate(s), len(s))
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrMalformed, s, err)
	}
	return id.String(), nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
