package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// standalone runs `go <args>` in the module in dir on its own, outside the
// workspace (GOWORK=off), as a user of its go.mod would build it, except
// that every sibling comes from the checkout: the command gets
// -modfile, a copy of go.mod with a replace directive per sibling (go.sum
// copied beside it), so the repository's go.mod files keep none. With
// tidy, args is ignored: `go mod tidy` runs on the copy and go.mod and
// go.sum are written back, without the replace directives.
func standalone(ctx context.Context, root, dir string, tidy bool, args []string) error {
	mods, err := loadModules(root)
	if err != nil {
		return err
	}
	var m *modDir
	for _, o := range mods {
		if o.Dir == filepath.ToSlash(filepath.Clean(dir)) {
			m = o
		}
	}
	if m == nil {
		return fmt.Errorf("%s: not a module of %s", dir, filepath.Join(root, "go.work"))
	}
	f, err := modfile.Parse(m.Dir+"/go.mod", m.Data, nil)
	if err != nil {
		return err
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	for _, o := range mods {
		if o != m {
			if err := f.AddReplace(o.Path, "", filepath.Join(absRoot, filepath.FromSlash(o.Dir)), ""); err != nil {
				return err
			}
		}
	}
	data, err := f.Format()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "lanes-standalone-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	modDir := filepath.Join(absRoot, filepath.FromSlash(m.Dir))
	tmpMod, tmpSum := filepath.Join(tmp, "go.mod"), filepath.Join(tmp, "go.sum")
	if err := os.WriteFile(tmpMod, data, 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.WriteFile(tmpSum, sum, 0o644); err != nil {
		return err
	}
	if tidy {
		args = []string{"mod", "tidy"}
	}
	if len(args) == 0 {
		return fmt.Errorf("standalone %s: no go command given", m.Dir)
	}
	// -modfile goes right after the go subcommand ("build", "vet", "mod tidy").
	at := 1
	if args[0] == "mod" && len(args) > 1 {
		at = 2
	}
	goArgs := append(append(append([]string{}, args[:at]...), "-modfile="+tmpMod), args[at:]...)
	cmd := exec.CommandContext(ctx, "go", goArgs...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = modDir, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: GOWORK=off go %s: %w", m.Dir, strings.Join(args, " "), err)
	}
	if !tidy {
		return nil
	}
	added := map[string]bool{}
	for _, o := range mods {
		added[o.Path] = o != m
	}
	return writeTidy(added, modDir, tmpMod, tmpSum)
}

// writeTidy writes the tidied copy back to the module: go.mod without the
// sibling replace directives standalone added (added[path]), and go.sum.
func writeTidy(added map[string]bool, modDir, tmpMod, tmpSum string) error {
	data, err := os.ReadFile(tmpMod)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(tmpMod, data, nil)
	if err != nil {
		return err
	}
	for _, r := range append([]*modfile.Replace(nil), f.Replace...) {
		if !added[r.Old.Path] {
			continue
		}
		if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return err
		}
	}
	f.Cleanup()
	if data, err = f.Format(); err != nil {
		return err
	}
	sum, err := os.ReadFile(tmpSum)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(modDir, "go.mod"), data, 0o644); err != nil {
		return err
	}
	if len(sum) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(modDir, "go.sum"), sum, 0o644)
}
