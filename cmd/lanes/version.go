package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// version is the line `lanes version` prints: the module version the
// binary was built from ("(devel)" for a build from a checkout) and the Go
// version that built it.
func version() string {
	return fmt.Sprintf("lanes %s (%s %s/%s)", moduleVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// moduleVersion is the version of the module the binary was built from:
// "v0.2.0", or "(devel)" for a build from a checkout.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionHelp is "lanes version -h".
var versionHelp = cli.Help{
	Name:  "version",
	About: "Prints the lanes module version the binary was built from and the Go version that built it; lanes --version does the same.",
}

func runVersion(args []string, stdout io.Writer) error {
	if err := cli.Parse(versionHelp.FlagSet(), versionHelp, args, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, version())
	return nil
}
