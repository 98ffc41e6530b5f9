package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounds of the tutorial's background processes; each go command has
// runStep's.
const (
	brokerListenTimeout = 30 * time.Second // lanes broker says where it listens
	programOutputTime   = 2 * time.Minute  // the program prints the output block
	programStopTime     = time.Minute      // it ends after Ctrl-C (Run's drain: 45 s at most)
)

// followTutorial follows docs/tutorial.md, as the release commit in repo
// has it, the way a user does in a module of their own (under
// work/tutorial): the setup block's commands (go mod init, go get, go
// install of the lanes command, into bin), the page's files, then the run
// block's: go mod tidy, go test, lanes broker (the binary go install made,
// on a free port) and go run (as go build and the binary, so that Ctrl-C
// reaches it), typing the input block's lines and waiting for the output
// block's. env is the check's (its module-proxy folder, no workspace)
// without GOFLAGS=-mod=mod: a requirement the page's commands do not add
// fails the build, as it would for the user. A lanes module version on the
// page other than version is replaced by it, and said.
func followTutorial(ctx context.Context, repo, work, bin string, env []string, version string) error {
	page, err := os.ReadFile(filepath.Join(repo, tutorialPage))
	if err != nil {
		return err
	}
	t, err := parseTutorial(string(page))
	if err != nil {
		return err
	}
	if err := follow(ctx, t, work, bin, env, version); err != nil {
		return fmt.Errorf("following %s in a module of its own: %w", tutorialPage, err)
	}
	fmt.Printf("tutorial ok: %s followed in a module of its own; the program printed its output block\n", tutorialPage)
	return nil
}

// follow does what t says under work/tutorial, bin holding the lanes command.
func follow(ctx context.Context, t *tutorial, work, bin string, env []string, version string) error {
	home := filepath.Join(work, "tutorial")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	f := &follower{t: t, home: home, dir: home, bin: bin, version: version,
		env: setEnv(env, "GOFLAGS=-modcacherw", "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))}
	defer f.stopBroker()
	fmt.Printf("tutorial: following %s in a module of its own, under %s\n", tutorialPage, home)
	for _, c := range t.setup {
		if err := f.do(ctx, c); err != nil {
			return err
		}
	}
	var files []string
	for rel := range t.files {
		files = append(files, rel)
	}
	sort.Strings(files)
	for _, rel := range files {
		text := t.files[rel]
		p := filepath.Join(f.dir, filepath.FromSlash(rel))
		fmt.Printf("tutorial: write %s (%d lines, from %s)\n", rel, strings.Count(text, "\n"), tutorialPage)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, c := range t.run {
		if err := f.do(ctx, c); err != nil {
			return err
		}
	}
	if !f.ran {
		return fmt.Errorf("%s: the run block never runs the program (go run ...)", tutorialPage)
	}
	if err := f.stopBroker(); err != nil {
		return fmt.Errorf("lanes broker after Ctrl-C: %w", err)
	}
	return nil
}

type follower struct {
	t              *tutorial
	home, dir, bin string
	version        string
	env            []string
	broker         *proc  // lanes broker, until stopped
	brokers        string // where it listens
	ran            bool   // the program ran
}

// do runs one command of the page.
func (f *follower) do(ctx context.Context, words []string) error {
	line := strings.Join(words, " ")
	switch {
	case words[0] == "mkdir" || words[0] == "cd":
		if len(words) != 2 || !filepath.IsLocal(words[1]) {
			return fmt.Errorf("%s: %q: the check follows mkdir DIR and cd DIR with a relative DIR only", tutorialPage, line)
		}
		fmt.Printf("$ %s\n", line)
		p := filepath.Join(f.dir, words[1])
		if words[0] == "mkdir" {
			return os.Mkdir(p, 0o755)
		}
		f.dir = p
		return nil
	case words[0] == "lanes" && len(words) > 1 && words[1] == "broker":
		return f.startBroker(words[2:])
	case words[0] == "go" && len(words) > 2 && words[1] == "run":
		return f.runProgram(ctx, words[2:])
	case words[0] == "go":
		_, err := runStep(ctx, f.dir, f.env, f.atVersion(words))
		return err
	}
	return fmt.Errorf("%s: the check does not know how to follow %q: keep the marked blocks to mkdir, cd, go and lanes broker, "+
		"or teach internal/release/follow.go", tutorialPage, line)
}

// atVersion returns words with each lanes module version moved to the
// checked one.
func (f *follower) atVersion(words []string) []string {
	out := append([]string(nil), words...)
	for i, w := range out {
		if path, v, ok := strings.Cut(w, "@"); ok && strings.HasPrefix(path, "github.com/lanesdev/lanes/") && v != f.version {
			fmt.Printf("tutorial: %s names %s, the check serves %s: using %s@%s\n", tutorialPage, w, f.version, path, f.version)
			out[i] = path + "@" + f.version
		}
	}
	return out
}

// startBroker starts the lanes command go install made (never one on the
// machine's PATH) as `lanes broker args`, on a free port whatever the page
// says (9092 may be taken), and waits until it says where it listens.
func (f *follower) startBroker(args []string) error {
	var kept []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--port" || a == "-port":
			i++
		case strings.HasPrefix(a, "--port=") || strings.HasPrefix(a, "-port="):
		default:
			kept = append(kept, a)
		}
	}
	exe := filepath.Join(f.bin, "lanes")
	args = append([]string{"broker"}, append(kept, "--port", "0")...)
	fmt.Printf("$ %s %s   (in the background; a free port)\n", exe, strings.Join(args, " "))
	addr := make(chan string, 1)
	out := &lineWriter{prefix: "lanes broker| ", line: func(l string) {
		if rest, ok := strings.CutPrefix(l, "embedded broker listening on "); ok && rest != "" {
			select {
			case addr <- strings.Fields(rest)[0]:
			default:
			}
		}
	}}
	p, err := start(exec.Command(exe, args...), f.dir, f.env, nil, out)
	if err != nil {
		return fmt.Errorf("lanes broker: %w", err)
	}
	f.broker = p
	timer := time.NewTimer(brokerListenTimeout)
	defer timer.Stop()
	select {
	case f.brokers = <-addr:
		return nil
	case <-p.done:
		return fmt.Errorf("lanes broker ended (%v) before it said where it listens (\"embedded broker listening on ...\")", p.err)
	case <-timer.C:
		return fmt.Errorf("lanes broker did not say where it listens (\"embedded broker listening on ...\") within %s", brokerListenTimeout)
	}
}

// stopBroker stops lanes broker (Ctrl-C) if it runs; it must end cleanly.
func (f *follower) stopBroker() error {
	p := f.broker
	if p == nil {
		return nil
	}
	f.broker = nil
	return p.stop(10 * time.Second)
}

// runProgram is `go run [build flags] pkg [args]`: go build, then the
// binary against the broker, typed the input block's lines; it waits until
// the program printed the output block's lines (each session's in order)
// and stops it with Ctrl-C (SIGINT), which it must end cleanly after.
func (f *follower) runProgram(ctx context.Context, args []string) error {
	if f.brokers == "" {
		return fmt.Errorf("%s: go run comes before lanes broker in the run block", tutorialPage)
	}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i == len(args) {
		return fmt.Errorf("%s: go run %s: no package", tutorialPage, strings.Join(args, " "))
	}
	exe := filepath.Join(f.home, "program")
	fmt.Printf("tutorial: go run %s, as go build and the binary (so that Ctrl-C reaches it)\n", strings.Join(args, " "))
	if _, err := runStep(ctx, f.dir, f.env, append(append([]string{"go", "build", "-o", exe}, args[:i]...), args[i])); err != nil {
		return err
	}
	lines := make(chan string, 1024)
	out := &lineWriter{prefix: "program| ", line: func(l string) {
		select {
		case lines <- l:
		default: // far more than the output block: the check has failed already
		}
	}}
	input := strings.Join(f.t.input, "\n") + "\n"
	fmt.Printf("$ KAFKA_BROKERS=%s HEALTH_ADDR=127.0.0.1:0 %s, typing:\n%s", f.brokers, strings.Join(append([]string{exe}, args[i+1:]...), " "), input)
	p, err := start(exec.Command(exe, args[i+1:]...), f.dir,
		setEnv(f.env, "KAFKA_BROKERS="+f.brokers, "HEALTH_ADDR=127.0.0.1:0"), strings.NewReader(input), out)
	if err != nil {
		return err
	}
	f.ran = true
	check := newOutputCheck(f.t.output)
	timer := time.NewTimer(programOutputTime)
	defer timer.Stop()
	for check.missing() != "" {
		select {
		case l := <-lines:
			if err := check.see(l); err != nil {
				p.kill()
				return fmt.Errorf("the tutorial's program %w (%s's output block)", err, tutorialPage)
			}
		case <-p.done: // after its output was written: what it printed is in lines
			for len(lines) > 0 {
				if err := check.see(<-lines); err != nil {
					return fmt.Errorf("the tutorial's program %w (%s's output block)", err, tutorialPage)
				}
			}
			if check.missing() == "" {
				return fmt.Errorf("the tutorial's program ended (%v) before Ctrl-C", p.err)
			}
			return fmt.Errorf("the tutorial's program ended (%v) before it printed:\n%s", p.err, check.missing())
		case <-timer.C:
			p.kill()
			return fmt.Errorf("the tutorial's program did not print within %s:\n%s", programOutputTime, check.missing())
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		}
	}
	fmt.Println("tutorial: the program printed every line of the output block; Ctrl-C")
	if err := p.stop(programStopTime); err != nil {
		return fmt.Errorf("the tutorial's program after Ctrl-C: %w", err)
	}
	return nil
}

// proc is a process of the check's that runs alongside it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it ended
	err  error         // how it ended, once done
}

// start starts cmd in dir with env and stdin, stdout and stderr written
// through out.
func start(cmd *exec.Cmd, dir string, env []string, stdin io.Reader, out *lineWriter) (*proc, error) {
	cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout = dir, env, stdin, out
	cmd.Stderr = &lineWriter{prefix: strings.TrimSuffix(out.prefix, "| ") + " (stderr)| "}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends Ctrl-C (SIGINT) and waits until the process ended, for grace
// at most (then kills it); it returns how it ended.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		p.kill()
		return fmt.Errorf("SIGINT: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.err
	case <-timer.C:
		p.kill()
		return fmt.Errorf("it did not end within %s of Ctrl-C (SIGINT); killed", grace)
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// lineWriter prints what a process writes, a line at a time after prefix,
// and hands each line to line (when set).
type lineWriter struct {
	prefix string
	line   func(string)
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		l := strings.TrimRight(string(w.buf.Next(i+1)), "\r\n")
		fmt.Println(w.prefix + l)
		if w.line != nil {
			w.line(l)
		}
	}
}

// setEnv returns a copy of env with each of kvs ("K=V") set.
func setEnv(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	set := map[string]bool{}
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}
