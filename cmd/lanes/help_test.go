package main

import (
	"strings"
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli/clitest"
)

// lanes is the program under test: every command and subcommand ("" is
// lanes itself).
var lanes = clitest.Program{
	Name: "lanes",
	Run:  run,
	Commands: []string{"", "broker", "dlq", "dlq inspect", "dlq replay", "park", "park inspect",
		"park release", "topics", "topics create", "topics check", "version"},
	NoFlags: []string{"version"},
	Moved:   map[string]string{"demo": "lanes-lab demo", "bench": "lanes-lab bench"},
}

// TestHelpStyle: every command's help has one layout (clitest.HelpStyle):
// "Usage: lanes <command>", one paragraph, its sections and a full link
// to its docs; -h, --help and -help print the same.
func TestHelpStyle(t *testing.T) { clitest.HelpStyle(t, lanes) }

// TestDocsFlags: every flag the docs write after a lanes command is one
// that command's help lists, spelt the same way (--name), and the docs
// write no lanes demo or lanes bench (they are lanes-lab's now).
func TestDocsFlags(t *testing.T) { clitest.DocsFlags(t, lanes, clitest.Docs(t, "../.."), 10) }

// TestHelpNamesLab: lanes -h says where the demo and the benchmarks went,
// and how to install it.
func TestHelpNamesLab(t *testing.T) {
	out := lanes.Help(t, "", "-h")
	for _, want := range []string{"lanes-lab demo", "lanes-lab bench", "go install github.com/lanesdev/lanes/cmd/lanes/lanes-lab@"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("lanes -h does not say %q:\n%s", want, out)
		}
	}
}
