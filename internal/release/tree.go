package main

import (
	stdzip "archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// releaseTree makes the release `make release` would make of root's HEAD,
// in a clone of root under dir: cut, applied, commits the sibling
// requirements moved to version and tags every released module there. The
// clone shares root's objects and takes none of its tags (so a version
// already tagged in root is cut again from HEAD, as an unchanged commit);
// root is only read: its branch, work tree and tags stay as they are. It
// returns the clone and its modules at the release commit. Changes not
// committed in root are not in the clone: release refuses them, and the
// check says so.
func releaseTree(root, version, dir string) (string, []*modDir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", nil, err
	}
	head, err := git(abs, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", nil, fmt.Errorf("release check works on the commit make release would tag, and %s has none: %w", abs, err)
	}
	status, err := git(abs, "status", "--porcelain")
	if err != nil {
		return "", nil, err
	}
	if status != "" {
		fmt.Printf("release check: the work tree has changes that are not committed; checking HEAD %s without them "+
			"(make release refuses them; commit to check them):\n%s\n", short(head), status)
	}
	repo := filepath.Join(dir, "repo")
	if _, err := git(abs, "clone", "-q", "--shared", "--no-tags", "--no-checkout", abs, repo); err != nil {
		return "", nil, fmt.Errorf("clone %s to cut the release in: %w", abs, err)
	}
	// The clone's own identity for the release commit and the tags, which
	// nobody publishes; unsigned, whatever the user's configuration says.
	for _, kv := range [][2]string{{"user.name", "lanes release check"}, {"user.email", "release-check@lanes.invalid"},
		{"commit.gpgSign", "false"}, {"tag.gpgSign", "false"}} {
		if _, err := git(repo, "config", kv[0], kv[1]); err != nil {
			return "", nil, err
		}
	}
	if _, err := git(repo, "checkout", "-q", "--detach", head); err != nil {
		return "", nil, err
	}
	fmt.Printf("release check: cutting %s from HEAD %s in a clone (what make release VERSION=%s APPLY=1 would do):\n", version, short(head), version)
	tags, err := cut(repo, version, true, indent{os.Stdout})
	if err != nil {
		return "", nil, fmt.Errorf("make release VERSION=%s would fail: %w", version, err)
	}
	commit, err := git(repo, "rev-parse", "HEAD", "HEAD^{tree}")
	if err != nil {
		return "", nil, err
	}
	ids := strings.Fields(commit)
	fmt.Printf("release check: the release commit %s (tree %s), %d tags; checking what they carry\n",
		short(ids[0]), short(ids[1]), len(tags))
	mods, err := loadModules(repo)
	return repo, mods, err
}

// serveTags writes a GOPROXY folder that serves every released module of
// repo at version from its tag <dir>/<version>, as the module proxy builds
// it from the published tag: the zip from the tagged commit's files
// (zip.CreateFromVCS: what `git archive` gives, without nested modules,
// with the root LICENSE when the module has none), the go.mod in that zip,
// and the time of the tagged commit.
func serveTags(repo, proxy string, mods []*modDir, version string) error {
	for _, m := range mods {
		if !m.released() {
			continue
		}
		tag := "refs/tags/" + m.Dir + "/" + version
		mv := module.Version{Path: m.Path, Version: version}
		var z bytes.Buffer
		if err := zip.CreateFromVCS(&z, mv, repo, tag, m.Dir); err != nil {
			return fmt.Errorf("the module zip of %s from tag %s: %w", m.Path, tag, err)
		}
		modData, err := zipGoMod(z.Bytes(), mv)
		if err != nil {
			return err
		}
		when, err := git(repo, "log", "-1", "--format=%cI", tag)
		if err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339, when)
		if err != nil {
			return fmt.Errorf("the time of %s: %w", tag, err)
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, t.UTC()})
		if err != nil {
			return err
		}
		files := map[string][]byte{"list": []byte(version + "\n"), version + ".info": info,
			version + ".mod": modData, version + ".zip": z.Bytes()}
		for name, data := range files {
			if err := writeFile(proxy, m.Path, name, data); err != nil {
				return err
			}
		}
		fmt.Printf("proxy: %s %s from tag %s\n", m.Path, version, strings.TrimPrefix(tag, "refs/tags/"))
	}
	return nil
}

// zipGoMod returns the go.mod of module zip z.
func zipGoMod(z []byte, mv module.Version) ([]byte, error) {
	r, err := stdzip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, err
	}
	f, err := r.Open(mv.Path + "@" + mv.Version + "/go.mod")
	if err != nil {
		return nil, fmt.Errorf("the module zip of %s@%s has no go.mod: %w", mv.Path, mv.Version, err)
	}
	defer f.Close()
	return io.ReadAll(f)
}

func writeFile(proxy, path, name string, data []byte) error {
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// indent writes each line to w with two spaces before it.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	lines := strings.SplitAfter(string(p), "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	if _, err := io.WriteString(i.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
