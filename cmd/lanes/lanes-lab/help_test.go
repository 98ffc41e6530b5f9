package main

import (
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli/clitest"
)

// lab is the program under test: every command ("" is lanes-lab itself).
var lab = clitest.Program{Name: "lanes-lab", Run: run, Commands: []string{"", "demo", "bench"}}

// TestHelpStyle: every command's help has one layout (clitest.HelpStyle):
// "Usage: lanes-lab <command>", one paragraph, its sections and a full
// link to its docs; -h, --help and -help print the same.
func TestHelpStyle(t *testing.T) { clitest.HelpStyle(t, lab) }

// TestDocsFlags: every flag the docs write after lanes-lab demo or
// lanes-lab bench (go run ./cmd/lanes/lanes-lab bench --rounds 3) is one
// that command's help lists, spelt the same way (--name).
func TestDocsFlags(t *testing.T) { clitest.DocsFlags(t, lab, clitest.Docs(t, "../../.."), 20) }
