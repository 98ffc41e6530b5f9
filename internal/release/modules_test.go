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
	if len(changes) != 1 || !strings.Contains(string(data), ex+"lib v0.2.0") ||
		!strings.Contains(string(data), ex+"base v0.0.0-00010101000000-000000000000") ||
		!strings.Contains(string(data), "replace "+ex+"lib => ../lib") {
		t.Fatalf("release versions only, replace kept: %v\n%s", changes, data)
	}
	data, changes, err = rewrite(mods[2], mods, "v0.2.0", nil)
	if err != nil || len(changes) != 2 || strings.Contains(string(data), "v0.0.0-") {
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
