package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// check serves every released module of the checkout from a module-proxy
// folder at version (go.mod files as committed, exactly what tags
// <module>/<version> at this commit would serve), then, in a fresh module
// outside the workspace, gets consumer, producer and lanestest at version,
// builds a program that uses them and runs it: one message sent and
// handled on the embedded broker.
func check(ctx context.Context, root, version string, keep bool) error {
	mods, err := loadModules(root)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "lanes-release-check-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("keeping", work)
	} else {
		defer os.RemoveAll(work)
	}
	proxy := filepath.Join(work, "proxy")
	if err := buildProxy(root, proxy, mods, version); err != nil {
		return err
	}
	app := filepath.Join(work, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/releasecheck\n\ngo 1.26.0\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(program), 0o644); err != nil {
		return err
	}
	get := []string{"go", "get", modPath(mods, "consumer") + "@" + version, modPath(mods, "producer") + "@" + version}
	if kit := modPath(mods, "lanestest"); kit != "" {
		get = append(get, kit+"@"+version)
		if err := os.WriteFile(filepath.Join(app, "kit.go"), []byte(kitProgram), 0o644); err != nil {
			return err
		}
	}
	env, err := userEnv(work, proxy)
	if err != nil {
		return err
	}
	steps := [][]string{
		get,
		{"go", "build", "-o", "releasecheck", "."},
		{"./releasecheck"},
	}
	for _, s := range steps {
		fmt.Printf("$ %s\n", strings.Join(s, " "))
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cmd := exec.CommandContext(sctx, s[0], s[1:]...)
		cmd.Dir, cmd.Env = app, env
		out, err := cmd.CombinedOutput()
		cancel()
		os.Stdout.Write(out)
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(s, " "), err)
		}
	}
	return nil
}

// userEnv is a new user's environment: no workspace, lanes modules from the
// proxy folder only (never the checksum database, never a module cache
// that may hold other builds of them), third-party modules from this
// machine's module cache when it has them, else from the usual proxy.
func userEnv(work, proxy string) ([]string, error) {
	out, err := exec.Command("go", "env", "GOPROXY", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	upstream, cache := lines[0], lines[len(lines)-1]
	chain := []string{fileURL(proxy)}
	if st, err := os.Stat(filepath.Join(cache, "cache", "download")); err == nil && st.IsDir() {
		chain = append(chain, fileURL(filepath.Join(cache, "cache", "download")))
	}
	if upstream != "" && upstream != "off" {
		chain = append(chain, upstream)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOWORK", "GOPROXY", "GOFLAGS", "GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE", "GONOPROXY", "GOMODCACHE", "GOTOOLCHAIN":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY="+strings.Join(chain, ","), "GONOSUMDB=github.com/lanesdev/*",
		"GOMODCACHE="+filepath.Join(work, "modcache")), nil
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// modPath returns the path of the module in dir, "" when there is none.
func modPath(mods []*modDir, dir string) string {
	for _, m := range mods {
		if m.Dir == dir {
			return m.Path
		}
	}
	return ""
}

// buildProxy writes a GOPROXY folder: every released module at version,
// from the checkout. A sibling requirement at another release version R is
// served from the tag <module>/R when the repository has it; without the
// tag (no release was tagged here yet) the checkout stands in for it.
// Pseudo-versions, such as a placeholder, are never served: no tag can
// make one.
func buildProxy(root, proxy string, mods []*modDir, version string) error {
	serve := map[string]map[string]bool{} // module dir → versions
	for _, m := range mods {
		if m.released() {
			serve[m.Dir] = map[string]bool{version: true}
		}
	}
	for _, m := range mods {
		for path, v := range siblings(m, mods) {
			for _, s := range mods {
				if s.Path == path && isRelease(v) && s.released() {
					if semver.Compare(v, version) > 0 {
						return fmt.Errorf("%s requires %s %s, newer than the candidate %s", m.Dir, path, v, version)
					}
					serve[s.Dir][v] = true
				}
			}
		}
	}
	for _, m := range mods {
		if !m.released() {
			continue
		}
		var list []string
		for v := range serve[m.Dir] {
			list = append(list, v)
		}
		sort.Slice(list, func(i, j int) bool { return semver.Compare(list[i], list[j]) < 0 })
		for _, v := range list {
			from, err := serveModule(root, proxy, m, v, v == version)
			if err != nil {
				return fmt.Errorf("serve %s %s: %w", m.Path, v, err)
			}
			fmt.Printf("proxy: %s %s from %s\n", m.Path, v, from)
		}
		if err := writeFile(proxy, m.Path, "list", []byte(strings.Join(list, "\n")+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// serveModule writes the .info, .mod and .zip of m at v and says where the
// files came from.
func serveModule(root, proxy string, m *modDir, v string, candidate bool) (string, error) {
	mv := module.Version{Path: m.Path, Version: v}
	tag := m.Dir + "/" + v
	from := "the checkout"
	var zipped bytes.Buffer
	var modData []byte
	if !candidate && exec.Command("git", "-C", root, "rev-parse", "-q", "--verify", "refs/tags/"+tag).Run() == nil {
		from = "tag " + tag
		if err := zip.CreateFromVCS(&zipped, mv, root, tag, m.Dir); err != nil {
			return "", err
		}
		out, err := exec.Command("git", "-C", root, "show", tag+":"+m.Dir+"/go.mod").Output()
		if err != nil {
			return "", err
		}
		modData = out
	} else {
		if !candidate {
			from += " (no tag " + tag + ")"
		}
		if err := zip.CreateFromDir(&zipped, mv, filepath.Join(root, filepath.FromSlash(m.Dir))); err != nil {
			return "", err
		}
		modData = m.Data
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, time.Now().UTC().Truncate(time.Second)})
	for ext, data := range map[string][]byte{"info": info, "mod": modData, "zip": zipped.Bytes()} {
		if err := writeFile(proxy, m.Path, v+"."+ext, data); err != nil {
			return "", err
		}
	}
	return from, nil
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
