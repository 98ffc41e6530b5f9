package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// check cuts the release of version from HEAD in a clone, as `make release
// VERSION=version APPLY=1` would (releaseTree), and serves every released
// module from a module-proxy folder built from the tags it made
// (serveTags), so that what it checks is what the tags carry. Then, in a
// fresh module outside the workspace, it gets consumer, producer,
// lanestest and codec at version, builds a program that uses them and
// runs it: one message sent and handled on the embedded broker, a JSON
// payload decoded by codec.Typed; and checks that the program builds no
// protobuf, Avro or schema-registry package. It installs the command line
// with `go install .../cmd/lanes@version` and runs `lanes version`, checks
// that installing it extracted none of the demo's and the bench's modules
// (lanes-lab's), then installs `.../cmd/lanes/lanes-lab@version` and runs
// `lanes-lab -h`. Last it follows docs/tutorial.md in a module of its own
// (followTutorial).
func check(ctx context.Context, root, version string, keep bool) error {
	work, err := os.MkdirTemp("", "lanes-release-check-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("keeping", work)
	} else {
		defer os.RemoveAll(work)
	}
	repo, mods, err := releaseTree(root, version, work)
	if err != nil {
		return err
	}
	proxy := filepath.Join(work, "proxy")
	if err := serveTags(repo, proxy, mods, version); err != nil {
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
	cli := modPath(mods, "cmd/lanes")
	if cli == "" {
		return nil
	}
	if err := installCLI(ctx, work, env, cli, version); err != nil {
		return err
	}
	return followTutorial(ctx, repo, work, filepath.Join(work, "bin"), env, version)
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
// name version; checks that the module cache holds none of labModules
// (module graph pruning: lanes builds no package of theirs, so the go
// command downloads their go.mod at most); then installs lanes-lab, the
// demo's and the bench's program, and runs `lanes-lab -h`.
func installCLI(ctx context.Context, work string, env []string, cli, version string) error {
	bin := filepath.Join(work, "bin")
	env = setEnv(env, "GOBIN="+bin, "GOFLAGS=-modcacherw") // go install pkg@version takes no -mod
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
	cache := filepath.Join(work, "modcache")
	for _, m := range labModules {
		if got, _ := filepath.Glob(filepath.Join(cache, filepath.FromSlash(m)+"@*")); len(got) > 0 {
			return fmt.Errorf("go install %s@%s downloaded %s (%s): only lanes-lab needs it", cli, version, m, got[0])
		}
	}
	fmt.Printf("go install ok: none of %s downloaded for lanes\n", strings.Join(labModules, ", "))
	lab := cli + "/lanes-lab"
	if _, err := runStep(ctx, work, env, []string{"go", "install", lab + "@" + version}); err != nil {
		return err
	}
	for _, m := range labModules { // lanes-lab builds them: the look above was in the right place
		if got, _ := filepath.Glob(filepath.Join(cache, filepath.FromSlash(m)+"@*")); len(got) == 0 {
			return fmt.Errorf("go install %s@%s: %s not in the module cache %s, where the check above looked for it", lab, version, m, cache)
		}
	}
	out, err = runStep(ctx, work, env, []string{filepath.Join(bin, "lanes-lab"), "-h"})
	if err != nil {
		return err
	}
	if !strings.HasPrefix(out, "Usage: lanes-lab ") || !strings.Contains(out, "demo") || !strings.Contains(out, "bench") {
		return fmt.Errorf("lanes-lab -h printed %q, want its usage with demo and bench", strings.TrimSpace(out))
	}
	fmt.Printf("go install ok: %s@%s installed; lanes-lab -h lists demo and bench\n", lab, version)
	return nil
}

// labModules are modules only lanes-lab (the demo and the bench) builds
// packages of: gonum plot, the dedup stores' clients, the OpenTelemetry
// SDK.
var labModules = []string{"gonum.org/v1/plot", "github.com/jackc/pgx/v5", "github.com/redis/go-redis/v9", "go.opentelemetry.io/otel/sdk"}

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
