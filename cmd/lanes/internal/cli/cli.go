// Package cli holds what the commands of lanes and lanes-lab share: the
// programs' main function and exit status (Main, ExitCode), the help
// format and flag parsing (Help, Parse), counts in words (Count), the TLS
// and SASL flags that connect them to a real cluster, and small terminal
// and environment helpers. Package clitest checks a program's helps and
// the docs' commands against them.
package cli

import (
	"fmt"
	"io"
	"os"
)

// IsTTY reports whether w is a terminal (progress lines are then rewritten
// in place).
func IsTTY(w io.Writer) bool {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return true
		}
	}
	return false
}

// EnvOr returns the environment variable name, or def when it is unset or
// empty.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// ProgressLine writes a live line: rewritten in place on a terminal (tty),
// one line each otherwise.
func ProgressLine(w io.Writer, tty bool, line string) {
	if tty {
		fmt.Fprintf(w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(w, line)
	}
}
