package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// workspace writes a go.work and one go.mod per module (dir → go.mod text).
func workspace(t *testing.T, mods map[string]string) string {
	t.Helper()
	root := t.TempDir()
	work := "go 1.26.0\n\nuse (\n"
	for dir, text := range mods {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		work += "\t./" + dir + "\n"
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte(work+")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

const ex = "example.com/x/"

func TestOrderAndRewrite(t *testing.T) {
	root := workspace(t, map[string]string{
		"app":           "module " + ex + "app\n\ngo 1.26.0\n\nrequire (\n\t" + ex + "lib v0.1.0\n\t" + ex + "base v0.0.0-00010101000000-000000000000\n)\n\nreplace " + ex + "lib => ../lib\n",
		"lib":           "module " + ex + "lib\n\ngo 1.26.0\n\nrequire " + ex + "base v0.1.0\n",
		"base":          "module " + ex + "base\n\ngo 1.26.0\n",
		"internal/tool": "module " + ex + "internal/tool\n\ngo 1.26.0\n",
	})
	mods, err := loadModules(root)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range mods {
		order = append(order, m.Dir)
	}
	if got := strings.Join(order, " "); got != "base lib app internal/tool" {
		t.Fatalf("order %q, want dependencies first", got)
	}
	if mods[3].released() || !mods[2].released() {
		t.Fatal("internal/ modules are not released; the others are")
	}

	data, changes, err := rewrite(mods[2], mods, "v0.2.0", isRelease)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || !strings.Contains(string(data), ex+"lib v0.2.0") ||
		!strings.Contains(string(data), ex+"base v0.0.0-00010101000000-000000000000") ||
		strings.Contains(string(data), "replace") {
		t.Fatalf("release versions only, sibling replace dropped: %v\n%s", changes, data)
	}
	if r := replaceDirectives(mods); len(r) != 1 || r[0] != "app/go.mod: replace "+ex+"lib" {
		t.Fatalf("replaceDirectives = %q", r)
	}
	data, changes, err = rewrite(mods[2], mods, "v0.2.0", nil)
	if err != nil || len(changes) != 3 || strings.Contains(string(data), "v0.0.0-") {
		t.Fatalf("every sibling: %v %v\n%s", err, changes, data)
	}
}

func TestChangelogVersion(t *testing.T) {
	root := t.TempDir()
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(root, "CHANGELOG.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# Changelog\n\n## v0.3.0 (unreleased)\n\n- x\n\n## v0.2.0\n")
	if v, err := changelogVersion(root); err != nil || v != "v0.3.0" {
		t.Fatalf("got %q, %v", v, err)
	}
	write("# Changelog\n\n## Unreleased\n")
	if _, err := changelogVersion(root); err == nil {
		t.Fatal("a heading without a version was accepted")
	}
	for v, ok := range map[string]bool{"v0.2.0": true, "v0.2": false, "v0.0.0-00010101000000-000000000000": false, "v1.0.0-rc.1": false} {
		if isRelease(v) != ok {
			t.Errorf("isRelease(%q) = %v", v, !ok)
		}
	}
}

func TestRewriteWork(t *testing.T) {
	root := workspace(t, map[string]string{
		"app": "module " + ex + "app\n\ngo 1.26.0\n\nrequire " + ex + "lib v0.1.0\n",
		"lib": "module " + ex + "lib\n\ngo 1.26.0\n",
	})
	mods, err := loadModules(root)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := unreplaced(root, mods); err != nil || len(u) != 1 || u[0] != ex+"lib@v0.1.0" {
		t.Fatalf("unreplaced = %q, %v; want lib@v0.1.0", u, err)
	}
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work = append(work, []byte("\n// the checkout\nreplace (\n\t"+ex+"lib v0.1.0 => ./lib\n)\n")...)
	if err := os.WriteFile(filepath.Join(root, "go.work"), work, 0o644); err != nil {
		t.Fatal(err)
	}
	if u, err := unreplaced(root, mods); err != nil || len(u) != 0 {
		t.Fatalf("unreplaced = %q, %v; want none", u, err)
	}
	data, changes, err := rewriteWork(root, mods, "v0.2.0")
	if err != nil || len(changes) != 1 || !strings.Contains(string(data), "// the checkout\nreplace (\n\t"+ex+"lib v0.2.0 => ./lib\n)") {
		t.Fatalf("go.work replace moved to v0.2.0: %v %v\n%s", err, changes, data)
	}
}

// TestRepository checks this repository's own workspace: no go.mod keeps a
// replace directive (`go install pkg@version` refuses one), and go.work
// replaces every sibling version a module requires with the checkout.
func TestRepository(t *testing.T) {
	mods, err := loadModules("../..")
	if err != nil {
		t.Fatal(err)
	}
	if r := replaceDirectives(mods); len(r) > 0 {
		t.Errorf("go.mod replace directives (move them to go.work):\n%s", strings.Join(r, "\n"))
	}
	u, err := unreplaced("../..", mods)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) > 0 {
		t.Errorf("go.work does not replace %s: add `replace <path> <version> => ./<dir>`", strings.Join(u, ", "))
	}
}

// TestReadmeVersion: the README's go get and go install lines name the
// version CHANGELOG.md describes first, the one make release-check serves.
func TestReadmeVersion(t *testing.T) {
	v, err := changelogVersion("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if (strings.HasPrefix(line, "go get ") || strings.HasPrefix(line, "go install ")) && !strings.Contains(line, "@"+v) {
			t.Errorf("README.md: %q does not name %s (CHANGELOG.md's newest version)", line, v)
		}
	}
	if !strings.Contains(string(readme), "cmd/lanes@"+v) {
		t.Errorf("README.md does not show go install github.com/lanesdev/lanes/cmd/lanes@%s", v)
	}
	if !strings.Contains(string(readme), "cmd/lanes/lanes-lab@"+v) {
		t.Errorf("README.md does not show go install github.com/lanesdev/lanes/cmd/lanes/lanes-lab@%s", v)
	}
}

func TestCodecFree(t *testing.T) {
	ok := "context\ngithub.com/lanesdev/lanes/codec\ngithub.com/twmb/franz-go/pkg/kgo\ngithub.com/twmb/franz-go/pkg/srx\n"
	if err := codecFree(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"google.golang.org/protobuf/proto", "github.com/twmb/avro", "github.com/twmb/franz-go/pkg/sr"} {
		if err := codecFree(ok + bad + "\n"); err == nil {
			t.Errorf("codecFree passed a build with %s", bad)
		}
	}
}
