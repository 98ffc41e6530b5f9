// Command release cuts a lanes release and checks that one works for a
// user who only has the module proxy.
//
//	release check [-version V] [-keep]   cut release V (default: the newest
//	                                     CHANGELOG.md version) of HEAD in a
//	                                     clone as tag -apply would, serve every
//	                                     module from its tag in a module-proxy
//	                                     folder, go get, build and run a program
//	                                     that uses them, go install the CLI,
//	                                     and follow docs/tutorial.md in a
//	                                     module of its own
//	release tag -version V [-apply]      rewrite every sibling requirement to V,
//	                                     commit, and tag <module>/V in
//	                                     dependency order (a dry run without
//	                                     -apply)
//	release standalone -dir D [-tidy] [-- go args]
//	                                     run `go args` (or `go mod tidy`) in
//	                                     module D outside the workspace, its
//	                                     siblings from the checkout
//
// Run it from the repository root or pass -root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "check" && os.Args[1] != "tag" && os.Args[1] != "standalone") {
		fmt.Fprintln(os.Stderr, "usage: release check|tag|standalone [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	root := fs.String("root", ".", "the repository root (holds go.work)")
	version := fs.String("version", "", "the release version vX.Y.Z (check: default the newest in CHANGELOG.md)")
	apply := fs.Bool("apply", false, "tag: commit and tag (default: only say what would be done)")
	keep := fs.Bool("keep", false, "check: keep the proxy folder and the program")
	dir := fs.String("dir", "", "standalone: the module's folder, relative to -root")
	tidy := fs.Bool("tidy", false, "standalone: run go mod tidy and write go.mod and go.sum back")
	_ = fs.Parse(os.Args[2:])
	var err error
	if cmd == "standalone" {
		if err = standalone(context.Background(), *root, *dir, *tidy, fs.Args()); err != nil {
			fmt.Fprintf(os.Stderr, "release standalone: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *version == "" && cmd == "check" {
		*version, err = changelogVersion(*root)
	}
	if err == nil && !isRelease(*version) {
		err = fmt.Errorf("-version %q: want a release version vX.Y.Z", *version)
	}
	if err == nil {
		if cmd == "check" {
			err = check(context.Background(), *root, *version, *keep)
		} else {
			err = release(*root, *version, *apply)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release %s: %v\n", cmd, err)
		os.Exit(1)
	}
	if cmd == "check" {
		fmt.Printf("release check: PASS (%s from a module proxy, outside the workspace)\n", *version)
	}
}
