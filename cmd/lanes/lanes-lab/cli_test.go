package main

import (
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli/clitest"
)

// TestHelp: -h on every command prints its usage and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"demo", "-h"}, {"bench", "-h"}, {"demo", "--help"}} {
		clitest.PrintsUsage(t, lab, args)
	}
}

// TestBadArgs: wrong input is rejected, never accepted silently, and the
// message names the one flag (or argument) that is wrong, with the
// program's name where it says how to list the flags.
func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no command given"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"broker"}, `unknown command "broker"`},
		{[]string{"demo", "--sessions", "0"}, "--sessions 0"},
		{[]string{"demo", "--sessions", "10", "--messages", "5"}, "--messages 5"},
		{[]string{"demo", "--transient", "1.5"}, "--transient 1.5"},
		{[]string{"demo", "--partitions", "0"}, "--partitions 0"},
		{[]string{"demo", "--paced-rate", "0"}, "--paced-rate 0"},
		{[]string{"demo", "--paced", "-1s"}, "--paced -1s"},
		{[]string{"demo", "--work", "-1s"}, "--work -1s"},
		{[]string{"demo", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"demo", "--dedup", "mysql"}, `--dedup "mysql"`},
		{[]string{"demo", "extra"}, `unexpected argument "extra": lanes-lab demo takes only flags`},
		{[]string{"demo", "--nope"}, "flag provided but not defined: --nope (lanes-lab demo -h lists the flags)"},
		{[]string{"bench", "--max-run", "0s"}, "--max-run 0s"},
		{[]string{"bench", "--mode", "open", "--rate", "0"}, "--rate 0"},
		{[]string{"bench", "extra"}, `unexpected argument "extra": lanes-lab bench takes only flags`},
	} {
		clitest.Refuses(t, lab, tc.args, tc.want)
	}
}
