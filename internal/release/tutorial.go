package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The tutorial (docs/tutorial.md) is a page a user follows in a module of
// their own; release check follows it the same way (follow.go). Its
// blocks are marked with HTML comments, which a rendered page hides:
//
//	<!-- file: examples/chat/chat.go -->       a ```go block: the file, at
//	                                           chat.go in the user's module
//	<!-- release-check: setup -->              a ```sh block run before the
//	                                           files are written
//	<!-- release-check: run -->                one run after
//	<!-- release-check: input -->              the lines typed into the program
//	<!-- release-check: output -->             lines it must print, each
//	                                           session's ("chat-42: ...") in order
const (
	tutorialPage = "docs/tutorial.md"
	// tutorialDir is the repository's copy of the user's module: a file
	// block of examples/chat/cmd/chat/main.go is cmd/chat/main.go there.
	tutorialDir = "examples/chat/"
)

var (
	fileBlock  = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```go\n(.*?)```\n")
	checkBlock = regexp.MustCompile("(?s)<!-- release-check: (\\w+) -->\n```\\w*\n(.*?)```\n")
)

// tutorial is what the page has a user do.
type tutorial struct {
	setup, run    [][]string        // commands, split into words
	files         map[string]string // path in the user's module → content
	input, output []string          // lines typed, lines printed
}

// parseTutorial reads the page's marked blocks; it fails when one is
// missing or repeated, or a file lies outside tutorialDir.
func parseTutorial(page string) (*tutorial, error) {
	t := &tutorial{files: map[string]string{}}
	for _, m := range fileBlock.FindAllStringSubmatch(page, -1) {
		rel, ok := strings.CutPrefix(m[1], tutorialDir)
		if !ok {
			return nil, fmt.Errorf("%s: <!-- file: %s --> is not under %s, the user's module", tutorialPage, m[1], tutorialDir)
		}
		t.files[rel] = m[2]
	}
	if len(t.files) == 0 {
		return nil, fmt.Errorf("%s: no <!-- file: %s... --> code block", tutorialPage, tutorialDir)
	}
	seen := map[string]bool{}
	for _, m := range checkBlock.FindAllStringSubmatch(page, -1) {
		kind, text := m[1], m[2]
		if seen[kind] {
			return nil, fmt.Errorf("%s: two <!-- release-check: %s --> blocks", tutorialPage, kind)
		}
		seen[kind] = true
		switch kind {
		case "setup":
			t.setup = commands(text)
		case "run":
			t.run = commands(text)
		case "input":
			t.input = lines(text)
		case "output":
			t.output = lines(text)
		default:
			return nil, fmt.Errorf("%s: <!-- release-check: %s -->: want setup, run, input or output", tutorialPage, kind)
		}
	}
	for _, kind := range []string{"setup", "run", "input", "output"} {
		if !seen[kind] {
			return nil, fmt.Errorf("%s: no <!-- release-check: %s --> block before a code block", tutorialPage, kind)
		}
	}
	return t, nil
}

// commands splits a shell block into commands: one a line, a trailing
// backslash continuing it, "a && b" two, "# ..." a comment. The page keeps
// to that much shell: the check runs the words, not a shell.
func commands(block string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if i := strings.Index(" "+line, " #"); i >= 0 {
			line = line[:i]
		}
		for c := range strings.SplitSeq(line, "&&") {
			if w := strings.Fields(c); len(w) > 0 {
				out = append(out, w)
			}
		}
	}
	return out
}

func lines(block string) []string {
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

// session is the session an output line names: "chat-42" of
// "chat-42: applied ...".
func session(line string) string {
	s, _, _ := strings.Cut(line, ":")
	return s
}

// outputCheck follows what a program prints against the lines it must:
// each session's in order, none twice; other lines pass.
type outputCheck struct {
	want    map[string][]string // session → lines not yet printed
	all     map[string]bool
	printed map[string]bool
}

func newOutputCheck(want []string) *outputCheck {
	c := &outputCheck{want: map[string][]string{}, all: map[string]bool{}, printed: map[string]bool{}}
	for _, l := range want {
		c.want[session(l)] = append(c.want[session(l)], l)
		c.all[l] = true
	}
	return c
}

// see takes a printed line; it fails on a wanted line out of its
// session's order or printed again.
func (c *outputCheck) see(line string) error {
	line = strings.TrimRight(line, " \r")
	if !c.all[line] {
		return nil
	}
	s, w := session(line), c.want[session(line)]
	switch {
	case c.printed[line] || len(w) == 0:
		return fmt.Errorf("printed %q twice", line)
	case w[0] != line:
		return fmt.Errorf("printed %q before %q: out of %s's order", line, w[0], s)
	}
	c.printed[line] = true
	c.want[s] = w[1:]
	return nil
}

// missing lists the lines not printed yet, "" when none.
func (c *outputCheck) missing() string {
	var out []string
	for _, w := range c.want {
		out = append(out, w...)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
