package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// modDir is one module of the workspace.
type modDir struct {
	Dir  string // relative to the repository root, slash-separated: "consumer", "cmd/lanes"
	Path string // module path
	File *modfile.File
	Data []byte // go.mod as it is on disk
}

// released reports whether a module is tagged and served: everything but
// the repository's own tooling under internal/ and the examples.
func (m *modDir) released() bool {
	return !strings.HasPrefix(m.Dir, "internal/") && m.Dir != "examples" && !strings.HasPrefix(m.Dir, "examples/")
}

// loadModules reads the modules the workspace uses (go.work), released or
// not, in dependency order: a module comes after every sibling it requires.
func loadModules(root string) ([]*modDir, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []*modDir
	for _, u := range wf.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		name := filepath.Join(root, dir, "go.mod")
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		mods = append(mods, &modDir{Dir: dir, Path: f.Module.Mod.Path, File: f, Data: data})
	}
	return dependencyOrder(mods)
}

// siblings returns the workspace modules m requires, with the version it
// requires each at.
func siblings(m *modDir, all []*modDir) map[string]string {
	paths := map[string]bool{}
	for _, o := range all {
		paths[o.Path] = true
	}
	out := map[string]string{}
	for _, r := range m.File.Require {
		if paths[r.Mod.Path] {
			out[r.Mod.Path] = r.Mod.Version
		}
	}
	return out
}

// dependencyOrder sorts mods so that every module follows the siblings it
// requires (ties by directory), and fails on a cycle.
func dependencyOrder(mods []*modDir) ([]*modDir, error) {
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir < mods[j].Dir })
	byPath := map[string]*modDir{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	var out []*modDir
	state := map[*modDir]int{} // 1 visiting, 2 done
	var visit func(m *modDir) error
	visit = func(m *modDir) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("module requirement cycle through %s", m.Path)
		case 2:
			return nil
		}
		state[m] = 1
		deps := siblings(m, mods)
		paths := make([]string, 0, len(deps))
		for p := range deps {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			if err := visit(byPath[p]); err != nil {
				return err
			}
		}
		state[m] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range mods {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rewrite returns m's go.mod with every sibling requirement whose current
// version passes move moved to version (nil move: every one), and a line per
// requirement it changed. A replace directive of a sibling is dropped: `go
// install pkg@version` refuses a module whose go.mod has one.
func rewrite(m *modDir, all []*modDir, version string, move func(old string) bool) ([]byte, []string, error) {
	f, err := modfile.Parse(m.Dir+"/go.mod", m.Data, nil)
	if err != nil {
		return nil, nil, err
	}
	var changes []string
	sib := siblings(m, all)
	for _, r := range f.Replace {
		if _, ok := sib[r.Old.Path]; ok {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, nil, err
			}
			changes = append(changes, fmt.Sprintf("%s/go.mod: replace %s dropped", m.Dir, r.Old.Path))
		}
	}
	for path, old := range sib {
		if old == version || (move != nil && !move(old)) {
			continue
		}
		if err := f.AddRequire(path, version); err != nil {
			return nil, nil, err
		}
		changes = append(changes, fmt.Sprintf("%s/go.mod: %s %s → %s", m.Dir, path, old, version))
	}
	sort.Strings(changes)
	f.Cleanup()
	data, err := f.Format()
	return data, changes, err
}

// changelogVersion returns the newest version CHANGELOG.md describes: its
// first "## vX.Y.Z" heading.
func changelogVersion(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "## "); ok {
			v, _, _ := strings.Cut(rest, " ")
			if !isRelease(v) {
				return "", fmt.Errorf("CHANGELOG.md: heading %q does not start with a release version", sc.Text())
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("CHANGELOG.md: no \"## vX.Y.Z\" heading")
}

// isRelease reports whether v is a release version: vX.Y.Z, no
// pre-release, so no pseudo-version.
func isRelease(v string) bool {
	return semver.IsValid(v) && semver.Prerelease(v) == "" && semver.Build(v) == "" && semver.Canonical(v) == v
}

// replaceDirectives lists the replace directives of the modules' go.mod
// files, one "dir/go.mod: replace path" line each: there must be none (the
// workspace's go.work replaces sibling versions for development).
func replaceDirectives(mods []*modDir) []string {
	var out []string
	for _, m := range mods {
		for _, r := range m.File.Replace {
			out = append(out, fmt.Sprintf("%s/go.mod: replace %s", m.Dir, r.Old.Path))
		}
	}
	return out
}
