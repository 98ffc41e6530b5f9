package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// release sets every sibling requirement to version, commits that, and tags
// every released module <dir>/<version> in dependency order (cut). Without
// apply it only says what it would do.
func release(root, version string, apply bool) error {
	tags, err := cut(root, version, apply, os.Stdout)
	if err != nil {
		return err
	}
	if !apply {
		fmt.Println("nothing changed: run with APPLY=1 (make) or -apply to commit and tag")
		return nil
	}
	fmt.Printf("done; publish with: git push origin HEAD %s\n", strings.Join(tags, " "))
	return nil
}

// cut is the release in the repository at root, saying each step on out:
// every sibling requirement (and go.work replace) moved to version, the
// commit of that, and the tags <dir>/<version> of the released modules in
// dependency order, which it returns. It writes, commits and tags only
// with apply. It refuses a dirty tree, a version CHANGELOG.md does not
// describe, go.mod replace directives and tags that exist. release check
// runs it, applied, in a clone, and serves what it tagged.
func cut(root, version string, apply bool, out io.Writer) ([]string, error) {
	mods, err := loadModules(root)
	if err != nil {
		return nil, err
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(version) + `\b`).Match(changelog) {
		return nil, fmt.Errorf("CHANGELOG.md has no \"## %s\" section: describe the release first", version)
	}
	if r := replaceDirectives(mods); len(r) > 0 {
		return nil, fmt.Errorf("go.mod files keep replace directives, which `go install pkg@version` refuses; go.work replaces siblings instead:\n%s", strings.Join(r, "\n"))
	}
	status, err := git(root, "status", "--porcelain")
	if err != nil {
		return nil, err
	}
	if status != "" {
		return nil, fmt.Errorf("the work tree is not clean:\n%s", status)
	}
	var tags []string
	for _, m := range mods {
		if !m.released() {
			continue
		}
		tag := m.Dir + "/" + version
		if _, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+tag); err == nil {
			return nil, fmt.Errorf("tag %s exists", tag)
		}
		tags = append(tags, tag)
	}

	mode := "dry run"
	if apply {
		mode = "applying"
	}
	fmt.Fprintf(out, "release %s (%s)\n", version, mode)
	var files []string
	for _, m := range mods {
		data, changes, err := rewrite(m, mods, version, nil)
		if err != nil {
			return nil, fmt.Errorf("%s/go.mod: %w", m.Dir, err)
		}
		for _, c := range changes {
			fmt.Fprintln(out, "  require", c)
		}
		if len(changes) == 0 {
			continue
		}
		name := filepath.Join(m.Dir, "go.mod")
		files = append(files, name)
		if apply {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	work, changes, err := rewriteWork(root, mods, version)
	if err != nil {
		return nil, fmt.Errorf("go.work: %w", err)
	}
	for _, c := range changes {
		fmt.Fprintln(out, " ", c)
	}
	if len(changes) > 0 {
		files = append(files, "go.work")
		if apply {
			if err := os.WriteFile(filepath.Join(root, "go.work"), work, 0o644); err != nil {
				return nil, err
			}
		}
	}
	if len(files) > 0 {
		fmt.Fprintf(out, "  commit \"release %s: sibling requirements at %s\" (%s)\n", version, version, strings.Join(files, ", "))
		if apply {
			args := append([]string{"commit", "-q", "-m", fmt.Sprintf("release %s: sibling requirements at %s", version, version), "--"}, files...)
			if _, err := git(root, args...); err != nil {
				return nil, err
			}
		}
	}
	for _, tag := range tags {
		fmt.Fprintln(out, "  tag", tag)
		if apply {
			if _, err := git(root, "tag", "-a", "-m", "lanes "+tag, tag); err != nil {
				return nil, err
			}
		}
	}
	return tags, nil
}

func git(root string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
