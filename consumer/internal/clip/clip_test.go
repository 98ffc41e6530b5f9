package clip

import (
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUTF8: the cut is at most n bytes, a prefix of s, valid UTF-8 when s
// is, and as long as it can be without splitting a character.
func TestUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"héllo", 2, "h"},  // é is 2 bytes: not split
		{"héllo", 3, "hé"}, // …and kept whole when it fits
		{"日本語", 4, "日"},    // 3-byte runes
		{"日本語", 6, "日本"},
		{"a😀b", 4, "a"}, // a 4-byte rune
	} {
		got := UTF8(tc.s, tc.n)
		if got != tc.want || len(got) > tc.n && len(tc.s) > tc.n || !utf8.ValidString(got) {
			t.Errorf("UTF8(%q, %d) = %q; want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
