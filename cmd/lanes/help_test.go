package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commands is every command and subcommand of lanes ("" is lanes itself).
var commands = []string{"", "demo", "bench", "broker", "dlq", "dlq inspect", "dlq replay", "park", "park inspect",
	"park release", "topics", "topics create", "topics check", "version"}

var (
	flagLine   = regexp.MustCompile(`^  --[a-z0-9]+(-[a-z0-9]+)*( (host:port|[A-Z][A-Z:_]*))?$`)
	descLine   = regexp.MustCompile(`^      \S`)
	cmdLine    = regexp.MustCompile(`^  [a-z]+ +\S`)
	docsLine   = regexp.MustCompile(`^Docs: https://github\.com/lanesdev/lanes/blob/main/docs/[A-Za-z]+\.md(#[a-z-]+)?$`)
	relative   = regexp.MustCompile(`(^|[^/])docs/[a-z]+\.md`)
	docFlag    = regexp.MustCompile(`(?:^|\s)(--[a-z][a-z0-9-]*)`)
	docCommand = regexp.MustCompile(`\blanes (demo|bench|broker|dlq inspect|dlq replay|park inspect|park release|topics create|topics check)\b([^#` + "`" + `]*)`)
)

// helpOf runs "lanes <cmd> -h" and returns what it printed on stdout.
func helpOf(t *testing.T, cmd string, flag string) string {
	t.Helper()
	args := append(strings.Fields(cmd), flag)
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	if code := exitCode(err, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("lanes %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// TestHelpStyle: every command's help has one layout: "Usage: lanes
// <command>", one paragraph, then its sections (the subcommands, the
// flags as the docs write them, --name VALUE with the description
// indented below, the TLS and SASL flags apart) and a full link to its
// docs, never a docs/ path that no installed binary carries. -h, --help
// and -help print the same.
func TestHelpStyle(t *testing.T) {
	for _, cmd := range commands {
		name := strings.TrimSpace("lanes " + cmd)
		t.Run(name, func(t *testing.T) {
			out := helpOf(t, cmd, "-h")
			for _, flag := range []string{"--help", "-help"} {
				if again := helpOf(t, cmd, flag); again != out {
					t.Errorf("%s %s printed another help than -h:\n%s", name, flag, again)
				}
			}
			if !strings.HasPrefix(out, "Usage: "+name) {
				t.Fatalf("does not start with %q:\n%s", "Usage: "+name, out)
			}
			if relative.MatchString(out) {
				t.Errorf("names a docs/ path, which an installed binary does not carry:\n%s", out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) < 3 || lines[1] != "" || lines[2] == "" {
				t.Fatalf("want the usage line, a blank line and a paragraph:\n%s", out)
			}
			i := 2
			for i < len(lines) && lines[i] != "" { // the paragraph
				if strings.HasPrefix(lines[i], " ") {
					t.Errorf("an indented line in the paragraph: %q", lines[i])
				}
				i++
			}
			section := ""
			for _, l := range lines[i:] {
				switch {
				case l == "":
					section = ""
				case section == "" && slices.Contains([]string{"Commands:", "Flags:", "TLS and SASL flags:"}, l):
					section = l
				case section == "" && strings.HasPrefix(l, `Run "`+name+` <command> -h"`):
				case section == "" && docsLine.MatchString(l):
				case section == "Commands:" && cmdLine.MatchString(l):
				case section != "" && section != "Commands:" && (flagLine.MatchString(l) || descLine.MatchString(l)):
				default:
					t.Errorf("line %q (section %q) is not in the help format", l, section)
				}
			}
			if strings.Contains(out, "Flags:") != (cmd != "" && cmd != "version" && !slices.ContainsFunc(commands, func(c string) bool {
				return strings.HasPrefix(c, cmd+" ")
			})) {
				t.Errorf("a Flags section on a command without flags, or none on one with flags:\n%s", out)
			}
		})
	}
}

// flagsOf returns the flags "lanes <cmd> -h" lists.
func flagsOf(t *testing.T, cmd string) []string {
	var flags []string
	for _, l := range strings.Split(helpOf(t, cmd, "-h"), "\n") {
		if flagLine.MatchString(l) {
			flags = append(flags, strings.Fields(l)[0])
		}
	}
	return flags
}

// TestDocsFlags: every flag the docs write after a lanes command is one
// that command's help lists, spelt the same way (--name).
func TestDocsFlags(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	if len(files) == 0 {
		t.Skip("no docs next to the module (a module zip)")
	}
	files = append(files, "../../README.md")
	known := map[string][]string{}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, m := range docCommand.FindAllStringSubmatch(line, -1) {
				cmd := m[1]
				if known[cmd] == nil {
					known[cmd] = flagsOf(t, cmd)
				}
				for _, fm := range docFlag.FindAllStringSubmatch(m[2], -1) {
					checked++
					if !slices.Contains(known[cmd], fm[1]) {
						t.Errorf("%s: lanes %s %s: no such flag in its help (%v)", filepath.Base(f), cmd, fm[1], known[cmd])
					}
				}
			}
		}
	}
	t.Logf("%d flags written after a lanes command in the docs", checked)
	if checked < 10 {
		t.Errorf("only %d flags found in the docs: is the pattern still right?", checked)
	}
}
