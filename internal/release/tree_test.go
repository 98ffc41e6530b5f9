package main

import (
	stdzip "archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// gitRepo writes files (path → text) under a new directory, commits them
// and returns the directory.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, root, "init", "-q", "-b", "main")
	for _, kv := range [][2]string{{"user.name", "test"}, {"user.email", "test@example.com"}, {"commit.gpgSign", "false"}, {"tag.gpgSign", "false"}} {
		gitT(t, root, "config", kv[0], kv[1]) // release commits and tags here
	}
	gitT(t, root, "add", "-A")
	gitT(t, root, "commit", "-q", "-m", "the tree")
	return root
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// released is a small repository: base; lib requires base at the released
// v0.1.0; app requires lib at v0.1.0 and base at a placeholder
// pseudo-version (the release moves both); internal/tool is not released.
func releasedRepo(t *testing.T) string {
	return gitRepo(t, map[string]string{
		"go.work":              "go 1.26.0\n\nuse (\n\t./app\n\t./base\n\t./lib\n\t./internal/tool\n)\n\nreplace (\n\t" + ex + "base v0.1.0 => ./base\n\t" + ex + "lib v0.1.0 => ./lib\n)\n",
		"CHANGELOG.md":         "# Changelog\n\n## v0.2.0\n\n- things\n",
		"LICENSE":              "the license\n",
		".gitignore":           "/app/app\n",
		"base/go.mod":          "module " + ex + "base\n\ngo 1.26.0\n",
		"base/base.go":         "package base\n",
		"lib/go.mod":           "module " + ex + "lib\n\ngo 1.26.0\n\nrequire " + ex + "base v0.1.0\n",
		"lib/lib.go":           "package lib\n",
		"lib/nested/go.mod":    "module " + ex + "lib/nested\n\ngo 1.26.0\n",
		"lib/nested/nested.go": "package nested\n",
		"app/go.mod":           "module " + ex + "app\n\ngo 1.26.0\n\nrequire (\n\t" + ex + "lib v0.1.0\n\t" + ex + "base v0.0.0-00010101000000-000000000000\n)\n",
		"app/main.go":          "package main\n\nfunc main() {}\n",
		"internal/tool/go.mod": "module " + ex + "internal/tool\n\ngo 1.26.0\n",
	})
}

// zipFiles returns a module zip's files, name → content.
func zipFiles(t *testing.T, data []byte) map[string]string {
	t.Helper()
	r, err := stdzip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range r.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(b)
	}
	return out
}

func names(files map[string]string) string {
	var n []string
	for k := range files {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, " ")
}

// TestCheckedTreeIsTagged: what release check serves from its proxy folder
// is, module by module, what the tags `make release` (release -apply)
// creates would serve: the go.mod with every sibling requirement at the
// version (a placeholder too), the files of the tagged commit and no file
// the commit lacks (an untracked or ignored file, an uncommitted edit), the
// root LICENSE, no nested module. And it leaves the repository it checks as
// it was: HEAD, branch, work tree, no tag.
func TestCheckedTreeIsTagged(t *testing.T) {
	const version = "v0.2.0"
	root := releasedRepo(t)
	// What a work tree holds besides its commit: none of it is tagged.
	for name, text := range map[string]string{"lib/scratch.go": "package lib // untracked\n", "app/app": "a build output (ignored)\n"} {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "base", "base.go"), []byte("package base // edited, not committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head, status := gitT(t, root, "rev-parse", "HEAD"), gitT(t, root, "status", "--porcelain")

	// The truth: make release in a copy of the repository, then each tag's
	// module as the go command builds it from the tag.
	tagged := filepath.Join(t.TempDir(), "tagged")
	gitT(t, root, "clone", "-q", root, tagged)
	gitT(t, tagged, "config", "user.name", "test")
	gitT(t, tagged, "config", "user.email", "test@example.com")
	if err := release(tagged, version, true); err != nil {
		t.Fatal(err)
	}

	repo, proxy := checkedProxy(t, root, version)
	if got, want := gitT(t, repo, "rev-parse", "HEAD^{tree}"), gitT(t, tagged, "rev-parse", "HEAD^{tree}"); got != want {
		t.Errorf("the check's release commit has tree %s, make release's %s", got, want)
	}
	if got, want := gitT(t, repo, "tag", "-l"), gitT(t, tagged, "tag", "-l"); got != want {
		t.Errorf("the check's tags\n%s\nmake release's\n%s", got, want)
	}

	for _, dir := range []string{"base", "lib", "app"} {
		mv := module.Version{Path: ex + dir, Version: version}
		tag := "refs/tags/" + dir + "/" + version
		var want bytes.Buffer
		if err := zip.CreateFromVCS(&want, mv, tagged, tag, dir); err != nil {
			t.Fatal(err)
		}
		wantMod := gitT(t, tagged, "show", tag+":"+dir+"/go.mod") + "\n"
		at := filepath.Join(proxy, filepath.FromSlash(ex+dir), "@v", version)
		gotMod, err := os.ReadFile(at + ".mod")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if string(gotMod) != wantMod {
			t.Errorf("%s: the check serves go.mod\n%s\nthe tag carries\n%s", dir, gotMod, wantMod)
		}
		gotZip, err := os.ReadFile(at + ".zip")
		if err != nil {
			t.Fatal(err)
		}
		got, wantFiles := zipFiles(t, gotZip), zipFiles(t, want.Bytes())
		if dir == "lib" && names(got) != "example.com/x/lib@v0.2.0/LICENSE example.com/x/lib@v0.2.0/go.mod example.com/x/lib@v0.2.0/lib.go" {
			t.Errorf("lib: the check serves %s; want the root LICENSE, go.mod and lib.go (no nested module, no untracked file)", names(got))
		}
		if names(got) != names(wantFiles) {
			t.Errorf("%s: the check serves files\n  %s\nthe tag carries\n  %s", dir, names(got), names(wantFiles))
			continue
		}
		for name, text := range wantFiles {
			if got[name] != text {
				t.Errorf("%s: %s: the check serves\n%s\nthe tag carries\n%s", dir, name, got[name], text)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(proxy, filepath.FromSlash(ex+"internal/tool"))); err == nil {
		t.Error("internal/tool is served; it is not released")
	}
	if h, s := gitT(t, root, "rev-parse", "HEAD"), gitT(t, root, "status", "--porcelain"); h != head || s != status {
		t.Errorf("the check moved HEAD (%s → %s) or changed the work tree:\n%s\n→\n%s", head, h, status, s)
	}
	if tags := gitT(t, root, "tag", "-l"); tags != "" {
		t.Errorf("the check tagged the repository: %s", tags)
	}
	if b := gitT(t, root, "branch", "--show-current"); b != "main" {
		t.Errorf("the check left the repository on %q, want main", b)
	}
}

// checkedProxy returns the clone release check cuts the release in and the
// proxy folder it serves at version from the repository at root.
func checkedProxy(t *testing.T, root, version string) (string, string) {
	t.Helper()
	work := t.TempDir()
	repo, mods, err := releaseTree(root, version, work)
	if err != nil {
		t.Fatal(err)
	}
	proxy := filepath.Join(work, "proxy")
	if err := serveTags(repo, proxy, mods, version); err != nil {
		t.Fatal(err)
	}
	return repo, proxy
}

// TestCheckRefusesWhatReleaseRefuses: the check fails where make release
// would, naming why: a go.mod replace directive, a version CHANGELOG.md
// does not describe.
func TestCheckRefusesWhatReleaseRefuses(t *testing.T) {
	root := releasedRepo(t)
	for version, want := range map[string]string{"v0.3.0": "CHANGELOG.md has no \"## v0.3.0\" section"} {
		if _, _, err := releaseTree(root, version, t.TempDir()); err == nil || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "make release VERSION="+version+" would fail") {
			t.Errorf("%s: %v; want it to say %q", version, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "lib", "go.mod"), []byte("module "+ex+"lib\n\ngo 1.26.0\n\nrequire "+ex+"base v0.1.0\n\nreplace "+ex+"base => ../base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, root, "commit", "-q", "-am", "a replace directive")
	if _, _, err := releaseTree(root, "v0.2.0", t.TempDir()); err == nil || !strings.Contains(err.Error(), "lib/go.mod: replace "+ex+"base") {
		t.Errorf("a go.mod replace directive: %v", err)
	}
}

// TestCheckAfterRelease: once the release is committed and tagged, the
// check of that version serves the release commit as it is (no second
// commit), whatever tags the repository has.
func TestCheckAfterRelease(t *testing.T) {
	root := releasedRepo(t)
	if err := release(root, "v0.2.0", true); err != nil {
		t.Fatal(err)
	}
	head := gitT(t, root, "rev-parse", "HEAD")
	repo, proxy := checkedProxy(t, root, "v0.2.0")
	if got := gitT(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("the check committed again: %s, the release commit %s", got, head)
	}
	if _, err := os.Stat(filepath.Join(proxy, filepath.FromSlash(ex+"app"), "@v", "v0.2.0.zip")); err != nil {
		t.Error(err)
	}
}
