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
	for _, r := range wf.Replace {
		path, old := r.Old.Path, r.Old.Version
		if !paths[path] || old == version || old == "" {
			continue
		}
		// In place, so the replace block and its comments stay as they are.
		moved := false
		for i, tok := range r.Syntax.Token {
			if tok == old && i > 0 && !moved {
				r.Syntax.Token[i], moved = version, true
			}
		}
		if !moved {
			return nil, nil, fmt.Errorf("go.work: replace %s %s: version not found in its line", path, old)
		}
		r.Old.Version = version
		changes = append(changes, fmt.Sprintf("go.work: replace %s %s → %s", path, old, version))
	}
	sort.Strings(changes)
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
