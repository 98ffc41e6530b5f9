// Command brokerready waits until a Kafka broker answers: it pings it, then
// creates and deletes a topic (so the controller is up too). kafka.sh uses
// it instead of a fixed sleep.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "comma-separated brokers")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	pid := flag.Int("pid", 0, "fail at once if this process exits")
	flag.Parse()
	if err := wait(strings.Split(*brokers, ","), *timeout, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "brokerready:", err)
		os.Exit(1)
	}
}

func wait(brokers []string, timeout time.Duration, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for attempt := 1; ; attempt++ {
		if pid > 0 && syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("broker process %d exited", pid)
		}
		if last = probe(ctx, brokers); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (%d attempts): %w", timeout, attempt, last)
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("lanes-ready-%d", time.Now().UnixNano())
	if _, err := adm.CreateTopic(pctx, 1, 1, nil, topic); err != nil {
		return err
	}
	_, err = adm.DeleteTopics(pctx, topic)
	return err
}
