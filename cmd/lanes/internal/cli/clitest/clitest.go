// Package clitest checks a program of this module, lanes or lanes-lab,
// from its tests: every command's help is in the one help format
// (HelpStyle), every flag the docs write after one of its commands is in
// that command's help (DocsFlags), and wrong input is refused with a
// message that names what is wrong (Refuses). Both programs' tests call
// it, so that the two are held to the same rules by the same code.
package clitest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// Program is a program under test.
type Program struct {
	Name string      // "lanes", "lanes-lab"
	Run  cli.RunFunc // its dispatcher, which main runs through cli.Main
	// Commands is every command and subcommand ("" is the program
	// itself): "dlq", "dlq inspect", ….
	Commands []string
	// NoFlags are the commands without subcommands that take no flag
	// ("version"): their help has no Flags section.
	NoFlags []string
	// Moved are commands the docs must no longer write after the
	// program's name, each with what they are now: "demo" → "lanes-lab
	// demo".
	Moved map[string]string
}

var (
	flagLine = regexp.MustCompile(`^  --[a-z0-9]+(-[a-z0-9]+)*( (host:port|[A-Z][A-Z:_]*))?$`)
	descLine = regexp.MustCompile(`^      \S`)
	cmdLine  = regexp.MustCompile(`^  [a-z]+ +\S`)
	docsLine = regexp.MustCompile(`^Docs: https://github\.com/lanesdev/lanes/blob/main/docs/[A-Za-z]+\.md(#[a-z-]+)?$`)
	relative = regexp.MustCompile(`(^|[^/])docs/[a-z]+\.md`)
	docFlag  = regexp.MustCompile(`(?:^|\s)(--[a-z][a-z0-9-]*)`)
)

// Help runs "<program> <cmd> <flag>" (flag: -h, --help or -help) and
// returns what it printed on stdout; it fails t unless that exits 0 with
// nothing on stderr.
func (p Program) Help(t testing.TB, cmd string, flag string) string {
	t.Helper()
	args := append(strings.Fields(cmd), flag)
	var out, errOut bytes.Buffer
	err := p.Run(context.Background(), args, &out, &errOut)
	if code := cli.ExitCode(p.Name, err, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("%s %s: exit %d, stderr %q", p.Name, strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// hasSubcommands reports whether cmd is a command with subcommands ("" is
// the program itself, which has commands).
func (p Program) hasSubcommands(cmd string) bool {
	if cmd == "" {
		return true
	}
	return slices.ContainsFunc(p.Commands, func(c string) bool { return strings.HasPrefix(c, cmd+" ") })
}

// HelpStyle checks that every command's help has one layout: "Usage:
// <program> <command>", one paragraph, then its sections (the
// subcommands, the flags as the docs write them, --name VALUE with the
// description indented below, the TLS and SASL flags apart) and a full
// link to its docs, never a docs/ path that no installed binary carries;
// and that -h, --help and -help print the same.
func HelpStyle(t *testing.T, p Program) {
	for _, cmd := range p.Commands {
		name := strings.TrimSpace(p.Name + " " + cmd)
		t.Run(name, func(t *testing.T) {
			out := p.Help(t, cmd, "-h")
			for _, flag := range []string{"--help", "-help"} {
				if again := p.Help(t, cmd, flag); again != out {
					t.Errorf("%s %s printed another help than -h:\n%s", name, flag, again)
				}
			}
			if !strings.HasPrefix(out, "Usage: "+name+"\n") && !strings.HasPrefix(out, "Usage: "+name+" ") {
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
			if wantFlags := !p.hasSubcommands(cmd) && !slices.Contains(p.NoFlags, cmd); strings.Contains(out, "Flags:") != wantFlags {
				t.Errorf("a Flags section on a command without flags, or none on one with flags:\n%s", out)
			}
		})
	}
}

// Flags returns the flags "<program> <cmd> -h" lists.
func (p Program) Flags(t testing.TB, cmd string) []string {
	t.Helper()
	var flags []string
	for _, l := range strings.Split(p.Help(t, cmd, "-h"), "\n") {
		if flagLine.MatchString(l) {
			flags = append(flags, strings.Fields(l)[0])
		}
	}
	return flags
}

// Docs returns the files DocsFlags reads, from a test in a package dir
// levels below the repository's root: docs/*.md and README.md. It skips t
// when there are none (a module zip carries no docs).
func Docs(t testing.TB, root string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if len(files) == 0 {
		t.Skip("no docs next to the module (a module zip)")
	}
	return append(files, filepath.Join(root, "README.md"))
}

// DocsFlags checks that every flag files write after one of p's commands
// that takes flags ("lanes dlq replay --reason", "go run
// ./cmd/lanes/lanes-lab bench --rounds 3") is one that command's help
// lists, spelt the same way (--name), up to a # or a backquote; that they
// write none of p.Moved after p's name; and that at least min such flags
// were found (fewer means the pattern no longer matches how the docs
// write commands).
func DocsFlags(t *testing.T, p Program, files []string, min int) {
	var leaves []string
	for _, c := range p.Commands {
		if c != "" && !p.hasSubcommands(c) && !slices.Contains(p.NoFlags, c) {
			leaves = append(leaves, regexp.QuoteMeta(c))
		}
	}
	slices.SortFunc(leaves, func(a, b string) int { return len(b) - len(a) }) // "dlq inspect" before a "dlq"
	// After the name: a space, not "lanes-lab" read as "lanes".
	command := regexp.MustCompile(`\b` + regexp.QuoteMeta(p.Name) + ` (` + strings.Join(leaves, "|") + `)\b([^#` + "`" + `]*)`)
	var moved *regexp.Regexp
	if len(p.Moved) > 0 {
		var names []string
		for c := range p.Moved {
			names = append(names, regexp.QuoteMeta(c))
		}
		moved = regexp.MustCompile(`(?:^|[^-\w])` + regexp.QuoteMeta(p.Name) + ` (` + strings.Join(names, "|") + `)\b`)
	}
	known := map[string][]string{}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if moved != nil {
				for _, m := range moved.FindAllStringSubmatch(line, -1) {
					t.Errorf("%s:%d: %s %s is %s now", filepath.Base(f), n+1, p.Name, m[1], p.Moved[m[1]])
				}
			}
			for _, m := range command.FindAllStringSubmatch(line, -1) {
				cmd := m[1]
				if known[cmd] == nil {
					known[cmd] = p.Flags(t, cmd)
				}
				for _, fm := range docFlag.FindAllStringSubmatch(m[2], -1) {
					checked++
					if !slices.Contains(known[cmd], fm[1]) {
						t.Errorf("%s:%d: %s %s %s: no such flag in its help (%v)", filepath.Base(f), n+1, p.Name, cmd, fm[1], known[cmd])
					}
				}
			}
		}
	}
	t.Logf("%d flags written after a %s command in the docs", checked, p.Name)
	if checked < min {
		t.Errorf("only %d flags found after a %s command in the docs, want at least %d: is the pattern still right?", checked, p.Name, min)
	}
}

// PrintsUsage checks, in a subtest named after args (-h, --help, help,
// "<command> -h"), that p prints its usage ("Usage: <program>", on stdout
// or stderr) and exits 0: asking for help is no failure.
func PrintsUsage(t *testing.T, p Program, args []string) {
	t.Run(strings.Join(args, " "), func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := p.Run(context.Background(), args, &out, &errOut)
		if code := cli.ExitCode(p.Name, err, &errOut); code != 0 {
			t.Fatalf("exit %d (%v), want 0\n%s", code, err, errOut.String())
		}
		if !strings.Contains(out.String()+errOut.String(), "Usage: "+p.Name) {
			t.Errorf("no usage printed:\n%s%s", out.String(), errOut.String())
		}
	})
}

// Refuses checks, in a subtest named after args, that p refuses them,
// never accepting them silently: exit status 1, and an error (or stderr)
// that contains want and names none of the internal packages the
// commands use.
func Refuses(t *testing.T, p Program, args []string, want string) {
	t.Run(strings.Join(args, " "), func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := p.Run(context.Background(), args, &out, &errOut)
		if err == nil {
			t.Fatalf("succeeded, want an error containing %q", want)
		}
		if cli.ExitCode(p.Name, err, &errOut) != 1 {
			t.Errorf("exit code not 1 for %v", err)
		}
		if !strings.Contains(err.Error()+errOut.String(), want) {
			t.Errorf("error %q, want one containing %q", err, want)
		}
		for _, internal := range []string{"lanestest", "kfake", "kadm", "kgo"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("error %q names the internal package %s", err, internal)
			}
		}
	})
}
