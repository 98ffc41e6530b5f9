package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the line `lanes version` prints: the module version the
// binary was built from ("(devel)" for a build from a checkout) and the Go
// version that built it.
func version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("lanes %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func runVersion(args []string, stdout io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stdout, "Usage:\n  lanes version   (or lanes --version)\n\nPrints the lanes module version and the Go version that built it.")
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("version: unexpected argument %q", args[0])
	}
	fmt.Fprintln(stdout, version())
	return nil
}
