//go:build unix

package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"example.com/chat"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSecondSignalQuits runs the tutorial's command: the first SIGTERM
// starts the consumer's shutdown, which waits for its group leave (held
// by the broker here, for LeaveTimeout); a second SIGTERM ends the process
// at once, by the signal, instead of being swallowed while the shutdown
// runs out its timeouts. lanes' lines reach stderr through slog.Default(),
// which the command leaves as it is.
func TestSecondSignalQuits(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "chat")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, chat.Topic, chat.DeadLetters))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// kfake deadlocks when Close meets a control function in SleepControl
	// (consumer/kfake_sleep_test.go): before b.Close the sleep is woken
	// and has returned, and none starts after.
	var (
		mu       sync.Mutex
		released bool
		asleep   sync.WaitGroup
	)
	release := make(chan struct{})
	defer func() {
		mu.Lock()
		released = true
		close(release)
		mu.Unlock()
		asleep.Wait()
	}()
	b.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		if released {
			mu.Unlock()
			return nil, nil, false
		}
		asleep.Add(1)
		mu.Unlock()
		defer asleep.Done()
		b.SleepControl(func() { <-release }) // the leave waits for LeaveTimeout
		return nil, nil, false
	})
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+strings.Join(b.ListenAddrs(), ","), "HEALTH_ADDR=127.0.0.1:0")
	stdin, err := cmd.StdinPipe() // left open: the command reads it until it ends
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // after a failure
	lines := bufio.NewScanner(stderr)
	var seen []string
	await := func(what string) {
		t.Helper()
		for lines.Scan() {
			seen = append(seen, lines.Text())
			if strings.Contains(lines.Text(), what) {
				return
			}
		}
		t.Fatalf("stderr ended before %q:\n%s", what, strings.Join(seen, "\n"))
	}
	await("partitions assigned")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("Ctrl-C again")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the command ended with %v; want it ended by the second SIGTERM", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the command ended with %v; want it ended by the second SIGTERM\n%s", err, strings.Join(seen, "\n"))
	}
}
