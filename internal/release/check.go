package main

import (
	stdzip "archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// check serves every released module of the checkout from a module-proxy
// folder at version, as tags <module>/<version> would serve them after
// `make release` (see buildProxy), then, in a fresh module
// outside the workspace, gets consumer, producer, lanestest and codec at
// version, builds a program that uses them and runs it: one message sent
// and handled on the embedded broker, a JSON payload decoded by
// codec.Typed; and checks that the program builds no protobuf, Avro or
// schema-registry package. Last, it installs the command line with
// `go install .../cmd/lanes@version` and runs `lanes version`.
func check(ctx context.Context, root, version string, keep bool) error {
	mods, err := loadModules(root)
	if err != nil {
		return err
	}
	if r := replaceDirectives(mods); len(r) > 0 {
		return fmt.Errorf("go.mod files keep replace directives, which `go install pkg@version` refuses; go.work replaces siblings instead:\n%s", strings.Join(r, "\n"))
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
	if typed := modPath(mods, "codec"); typed != "" {
		get = append(get, typed+"@"+version)
		if err := os.WriteFile(filepath.Join(app, "typed.go"), []byte(typedProgram), 0o644); err != nil {
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
		{"go", "list", "-deps", "."},
	}
	for _, s := range steps {
		out, err := runStep(ctx, app, env, s)
		if err != nil {
			return err
		}
		if len(s) > 1 && s[1] == "list" {
			if err := codecFree(out); err != nil {
				return err
			}
		}
	}
	if cli := modPath(mods, "cmd/lanes"); cli != "" {
		return installCLI(ctx, work, env, cli, version)
	}
	return nil
}

// heavyDeps are the packages only the codec format modules may bring.
var heavyDeps = []string{"google.golang.org/protobuf", "github.com/twmb/avro", "github.com/twmb/franz-go/pkg/sr"}

// codecFree fails when the program's packages (go list -deps) include
// protobuf, Avro or the schema-registry client: consumer, producer,
// lanestest and codec (JSON) must not bring them.
func codecFree(deps string) error {
	for _, p := range strings.Fields(deps) {
		for _, h := range heavyDeps {
			if p == h || strings.HasPrefix(p, h+"/") {
				return fmt.Errorf("the program builds %s: consumer, producer, lanestest and codec must not depend on protobuf, Avro or the schema registry", p)
			}
		}
	}
	fmt.Println("releasecheck: no protobuf, Avro or schema-registry package in the program's build")
	return nil
}

// installCLI installs the command line as a user would, `go install
// <cli>@version` outside any module, and runs `lanes version`, which must
// name version.
func installCLI(ctx context.Context, work string, env []string, cli, version string) error {
	bin := filepath.Join(work, "bin")
	env = append(env, "GOBIN="+bin)
	for i, kv := range env {
		if strings.HasPrefix(kv, "GOFLAGS=") {
			env[i] = "GOFLAGS=-modcacherw" // go install pkg@version takes no -mod
		}
	}
	if _, err := runStep(ctx, work, env, []string{"go", "install", cli + "@" + version}); err != nil {
		return err
	}
	out, err := runStep(ctx, work, env, []string{filepath.Join(bin, "lanes"), "version"})
	if err != nil {
		return err
	}
	if !strings.Contains(out, version) {
		return fmt.Errorf("lanes version printed %q, want it to name %s", strings.TrimSpace(out), version)
	}
	fmt.Printf("go install ok: %s@%s installed; lanes version: %s\n", cli, version, strings.TrimSpace(out))
	return nil
}

// runStep runs one command of the check in dir, echoing it and its output.
func runStep(ctx context.Context, dir string, env, s []string) (string, error) {
	fmt.Printf("$ %s\n", strings.Join(s, " "))
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(sctx, s[0], s[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	os.Stdout.Write(out)
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(s, " "), err)
	}
	return string(out), nil
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

// buildProxy writes a GOPROXY folder with every released module at
// version, from the checkout, its go.mod as `make release` would commit it:
// every sibling requirement at a release version moved to version. Any
// other requirement, such as a placeholder pseudo-version, stays as it is
// and is not served: no tag can make it.
func buildProxy(root, proxy string, mods []*modDir, version string) error {
	for _, m := range mods {
		if !m.released() {
			continue
		}
		modData, changes, err := rewrite(m, mods, version, isRelease)
		if err != nil {
			return err
		}
		var dirZip bytes.Buffer
		mv := module.Version{Path: m.Path, Version: version}
		if err := zip.CreateFromDir(&dirZip, mv, filepath.Join(root, filepath.FromSlash(m.Dir))); err != nil {
			return fmt.Errorf("zip %s: %w", m.Dir, err)
		}
		zipped, err := replaceGoMod(dirZip.Bytes(), mv, modData)
		if err != nil {
			return err
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, time.Now().UTC().Truncate(time.Second)})
		files := map[string][]byte{"list": []byte(version + "\n"), version + ".info": info,
			version + ".mod": modData, version + ".zip": zipped}
		for name, data := range files {
			if err := writeFile(proxy, m.Path, name, data); err != nil {
				return err
			}
		}
		fmt.Printf("proxy: %s %s (%d sibling requirements moved to %s)\n", m.Path, version, len(changes), version)
	}
	return nil
}

// replaceGoMod returns the module zip z with its go.mod replaced by data.
func replaceGoMod(z []byte, mv module.Version, data []byte) ([]byte, error) {
	r, err := stdzip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w := stdzip.NewWriter(&out)
	for _, f := range r.File {
		dst, err := w.Create(f.Name)
		if err != nil {
			return nil, err
		}
		if f.Name == mv.Path+"@"+mv.Version+"/go.mod" {
			_, err = dst.Write(data)
		} else {
			var src io.ReadCloser
			if src, err = f.Open(); err == nil {
				_, err = io.Copy(dst, src)
				src.Close()
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
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
