package main

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestTutorialPage: docs/tutorial.md has what release check follows: its
// three files, a setup block that makes a module, gets every lanes module
// the files import and installs the lanes command, all at the version
// CHANGELOG.md describes first, and a run block that starts lanes broker
// before it runs the program.
func TestTutorialPage(t *testing.T) {
	version, err := changelogVersion("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../" + tutorialPage)
	if err != nil {
		t.Fatal(err)
	}
	tut, err := parseTutorial(string(page))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for f := range tut.files {
		files = append(files, f)
	}
	sort.Strings(files)
	if got := strings.Join(files, " "); got != "chat.go chat_test.go cmd/chat/main.go" {
		t.Errorf("files %s, want chat.go chat_test.go cmd/chat/main.go", got)
	}
	mods, err := loadModules("../..")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{} // module paths go get names
	var install, modInit bool
	for _, c := range tut.setup {
		line := strings.Join(c, " ")
		for _, w := range c {
			if path, v, ok := strings.Cut(w, "@"); ok && strings.HasPrefix(path, "github.com/lanesdev/lanes/") {
				if v != version {
					t.Errorf("%s: %q names %s, not %s (CHANGELOG.md's newest)", tutorialPage, line, w, version)
				}
				got[path] = c[1] == "get"
			}
		}
		install = install || strings.HasPrefix(line, "go install github.com/lanesdev/lanes/cmd/lanes@")
		modInit = modInit || strings.HasPrefix(line, "go mod init ")
	}
	if !install || !modInit {
		t.Errorf("%s: the setup block makes a module (go mod init: %v) and installs the lanes command (go install: %v)", tutorialPage, modInit, install)
	}
	for name, text := range tut.files {
		f, err := parser.ParseFile(token.NewFileSet(), name, text, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if m := moduleOf(mods, p); m != "" && !got[m] {
				t.Errorf("%s imports %s, and the setup block does not go get %s", name, p, m)
			}
		}
	}
	var order []string
	for _, c := range tut.run {
		order = append(order, c[0]+" "+c[1])
	}
	if got := strings.Join(order, ", "); !strings.Contains(got, "lanes broker, go run") {
		t.Errorf("%s: the run block runs %s; want lanes broker, then go run", tutorialPage, got)
	}
	if len(tut.input) == 0 || len(tut.output) == 0 {
		t.Errorf("%s: input %q, output %q", tutorialPage, tut.input, tut.output)
	}
}

// moduleOf returns the released module that holds package p, "" when none.
func moduleOf(mods []*modDir, p string) string {
	best := ""
	for _, m := range mods {
		if m.released() && (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && len(m.Path) > len(best) {
			best = m.Path
		}
	}
	return best
}

func TestCommands(t *testing.T) {
	got := commands("mkdir chat && cd chat   # a comment\ngo get a@v1 \\\n    b@v1\n\n# only a comment\ngo run ./cmd/x#y\n")
	want := [][]string{{"mkdir", "chat"}, {"cd", "chat"}, {"go", "get", "a@v1", "b@v1"}, {"go", "run", "./cmd/x#y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("commands = %q, want %q", got, want)
	}
}

func TestParseTutorialRefuses(t *testing.T) {
	file := "<!-- file: examples/chat/chat.go -->\n```go\npackage chat\n```\n"
	block := func(kind string) string { return "<!-- release-check: " + kind + " -->\n```sh\nx\n```\n" }
	all := file + block("setup") + block("run") + block("input") + block("output")
	if _, err := parseTutorial(all); err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string]string{
		"no output":     file + block("setup") + block("run") + block("input"),
		"two runs":      all + block("run"),
		"unknown block": all + block("teardown"),
		"outside":       strings.Replace(all, "examples/chat/", "cmd/lanes/", 1),
	} {
		if _, err := parseTutorial(page); err == nil || !strings.Contains(err.Error(), tutorialPage) {
			t.Errorf("%s: %v; want an error naming %s", name, err, tutorialPage)
		}
	}
}

func TestOutputCheck(t *testing.T) {
	c := newOutputCheck([]string{"a: 1", "a: 2", "b: 1"})
	for _, l := range []string{"noise", "b: 1", "a: 1 ", "other: x"} {
		if err := c.see(l); err != nil {
			t.Fatal(err)
		}
	}
	if m := c.missing(); m != "a: 2" {
		t.Fatalf("missing %q", m)
	}
	if err := c.see("a: 1"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a line printed twice: %v", err)
	}
	c = newOutputCheck([]string{"a: 1", "a: 2"})
	if err := c.see("a: 2"); err == nil || !strings.Contains(err.Error(), "order") {
		t.Fatalf("out of order: %v", err)
	}
}

// TestFollowerRunsOnlyWhatItKnows: a command the check does not know is
// refused, not run; a directory outside the module's is refused; a lanes
// version other than the checked one is replaced.
func TestFollowerRunsOnlyWhatItKnows(t *testing.T) {
	f := &follower{home: t.TempDir(), version: "v0.3.0"}
	f.dir = f.home
	for _, c := range [][]string{{"rm", "-rf", "x"}, {"cd", "../.."}, {"mkdir", "/tmp/x"}, {"curl", "x"}} {
		if err := f.do(context.Background(), c); err == nil || !strings.Contains(err.Error(), tutorialPage) {
			t.Errorf("%q: %v; want it refused, naming %s", c, err, tutorialPage)
		}
	}
	got := f.atVersion([]string{"go", "get", "github.com/lanesdev/lanes/consumer@v0.2.0", "example.com/x@v1.0.0"})
	if want := []string{"go", "get", "github.com/lanesdev/lanes/consumer@v0.3.0", "example.com/x@v1.0.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("atVersion = %q, want %q", got, want)
	}
	if err := f.do(context.Background(), []string{"go", "run", "."}); err == nil || !strings.Contains(err.Error(), "before lanes broker") {
		t.Errorf("go run before lanes broker: %v", err)
	}
}

// TestRunProgram runs a program as the check runs the tutorial's (an echo
// of its input that ends on Ctrl-C, or at once on "exit"): it passes when
// the output block's lines come, each session's in order, and the program
// ends cleanly on Ctrl-C; it fails, naming why, on lines out of order and
// on a program that ends before printing them.
func TestRunProgram(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod": "module example.com/echo\n\ngo 1.26.0\n",
		"main.go": `package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	if os.Getenv("KAFKA_BROKERS") != "127.0.0.1:1" {
		os.Exit(3)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "exit" {
			os.Exit(0)
		}
		fmt.Println(in.Text())
	}
	<-c
}
`} {
		if err := os.WriteFile(dir+"/"+name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name          string
		input, output []string
		err           string
	}{
		{"sessions interleaved", []string{"b: 1", "a: 1", "noise", "a: 2"}, []string{"a: 1", "a: 2", "b: 1"}, ""},
		{"out of order", []string{"a: 2", "a: 1"}, []string{"a: 1", "a: 2"}, `printed "a: 2" before "a: 1"`},
		{"ends early", []string{"a: 1", "exit"}, []string{"a: 1", "a: 2"}, "ended (<nil>) before it printed:\na: 2"},
	} {
		f := &follower{t: &tutorial{input: c.input, output: c.output}, home: dir, dir: dir, brokers: "127.0.0.1:1",
			env: setEnv(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")}
		err := f.runProgram(context.Background(), []string{"."})
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v; want %q", c.name, err, c.err)
		}
	}
}
