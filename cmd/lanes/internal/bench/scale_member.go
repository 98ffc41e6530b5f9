package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
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
		fmt.Fprintln(stderr, "lanes-lab bench member:", err)
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
	var lat latencies
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		time.Sleep(work) // the simulated call to the dependency
		<-slots
		lat.add(time.Since(m.Record.Timestamp))
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
	last, lastLat := -1, ""
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C: // ownership has no signal of its own: sample it
			if n := len(c.Stats().Partitions); n != last {
				last = n
				fmt.Fprintf(out, "partitions %d\n", n)
			}
			if t := lat.text(); t != lastLat { // only when something was handled
				lastLat = t
				fmt.Fprintf(out, "latencies %s\n", t)
			}
			_ = out.Flush()
		}
	}
}

// latencies counts the messages handled by their latency (the record's
// timestamp to handled), in buckets 10 % apart from 10 µs.
type latencies struct {
	mu sync.Mutex
	n  [latBuckets]int64
}

const latBuckets = 180 // up to about 280 s

func latBucket(d time.Duration) int {
	us := float64(d.Microseconds())
	if us < 10 {
		return 0
	}
	return min(latBuckets-1, 1+int(math.Log(us/10)/math.Log(1.1)))
}

// latUpper is the upper bound of bucket i.
func latUpper(i int) time.Duration {
	return time.Duration(10*math.Pow(1.1, float64(i))) * time.Microsecond
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.n[latBucket(d)]++
	l.mu.Unlock()
}

// text is the counts so far, space-separated.
func (l *latencies) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for i, n := range l.n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	return b.String()
}

// parseLatencies reads text's output.
func parseLatencies(s string) ([latBuckets]int64, bool) {
	var out [latBuckets]int64
	f := strings.Fields(s)
	if len(f) != latBuckets {
		return out, false
	}
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return out, false
		}
		out[i] = v
	}
	return out, true
}
