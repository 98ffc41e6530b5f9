package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
)

// rewriteWork returns go.work with every replace of a workspace module moved
// to version, and a line per replace it changed: go.work replaces the
// version the siblings require with the checkout, so it moves with them.
func rewriteWork(root string, mods []*modDir, version string) ([]byte, []string, error) {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, nil, err
	}
	paths := map[string]bool{}
	for _, m := range mods {
		paths[m.Path] = true
	}
	var changes []string
	for _, r := range append([]*modfile.Replace(nil), wf.Replace...) {
		path, old, dir := r.Old.Path, r.Old.Version, r.New.Path
		if !paths[path] || old == version || old == "" {
			continue
		}
		if err := wf.DropReplace(path, old); err != nil {
			return nil, nil, err
		}
		if err := wf.AddReplace(path, version, dir, ""); err != nil {
			return nil, nil, err
		}
		changes = append(changes, fmt.Sprintf("go.work: replace %s %s → %s", path, old, version))
	}
	sort.Strings(changes)
	wf.Cleanup()
	return modfile.Format(wf.Syntax), changes, nil
}

// unreplaced lists the sibling requirements (path@version) that go.work does
// not replace with the checkout: a workspace build would fetch them.
func unreplaced(root string, mods []*modDir) ([]string, error) {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	replaced := map[string]bool{}
	for _, r := range wf.Replace {
		replaced[r.Old.Path+"@"+r.Old.Version] = true
		if r.Old.Version == "" {
			replaced[r.Old.Path] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range mods {
		for path, v := range siblings(m, mods) {
			key := path + "@" + v
			if !replaced[key] && !replaced[path] && !seen[key] {
				seen[key] = true
				out = append(out, key)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
