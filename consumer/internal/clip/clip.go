// Package clip cuts text to a byte budget without splitting a character:
// what the dead-letter and park headers carry of an error.
package clip

import "unicode/utf8"

// MaxError bounds the error text a lanes header carries (lanes-dlq-error,
// lanes-park-reason).
const MaxError = 1024

// UTF8 returns s cut to at most n bytes, at a rune boundary.
func UTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
