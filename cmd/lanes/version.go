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
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("lanes %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
