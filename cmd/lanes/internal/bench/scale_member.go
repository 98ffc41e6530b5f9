package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A --scale run's members are processes: the running binary again (lanes
// bench, or a test binary whose TestMain calls MemberMain), told by these
// variables what to consume. A member stops when its standard input
// closes (its parent ended or stopped it) and reports its owned partition
// count on standard output, a "partitions N" line at each change.
const (
	envMember  = "LANES_BENCH_MEMBER" // set: this process is a member
	envBrokers = "LANES_BENCH_BROKERS"
	envGroup   = "LANES_BENCH_GROUP"
	envTopic   = "LANES_BENCH_TOPIC"
	envWork    = "LANES_BENCH_WORK"
	envPool    = "LANES_BENCH_POOL"
)

// IsMember reports whether this process was started as a --scale member.
func IsMember() bool { return os.Getenv(envMember) != "" }

// MemberMain runs this process as a --scale member until its standard
// input closes; it returns the exit code.
func MemberMain(stdin io.Reader, stdout, stderr io.Writer) int {
	if err := runMember(stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "lanes bench member:", err)
		return 1
	}
	return 0
}

func runMember(stdin io.Reader, stdout io.Writer) error {
	work, err := time.ParseDuration(os.Getenv(envWork))
	if err != nil {
		return fmt.Errorf("%s: %w", envWork, err)
	}
	pool, err := strconv.Atoi(os.Getenv(envPool))
	if err != nil || pool < 1 {
		return fmt.Errorf("%s %q: want a positive count", envPool, os.Getenv(envPool))
	}
	slots := make(chan struct{}, pool) // the process's dependency: at most pool calls at once
	h := consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-slots }()
		time.Sleep(work) // the simulated call to the dependency
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: strings.Split(os.Getenv(envBrokers), ","), Group: os.Getenv(envGroup),
		Topics: []string{os.Getenv(envTopic)}, Retry: consumer.RetryPolicy{Forever: true},
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(10 * time.Second)}}, h)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the parent closes our standard input to stop us
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	out := bufio.NewWriter(stdout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := -1
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C: // ownership has no signal of its own: sample it
			if n := len(c.Stats().Partitions); n != last {
				last = n
				fmt.Fprintf(out, "partitions %d\n", n)
				_ = out.Flush()
			}
		}
	}
}
