// Command brokerready waits until a Kafka broker answers: it pings it, then
// creates and deletes a topic (so the controller is up too), and with -nodes
// checks that the cluster's metadata lists those node IDs among its brokers
// (a node that restarted is back). kafka.sh uses it instead of a fixed
// sleep.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
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
	nodes := flag.String("nodes", "", "comma-separated node IDs the metadata must list (none: any)")
	flag.Parse()
	ids, err := parseIDs(*nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "brokerready: -nodes:", err)
		os.Exit(2)
	}
	if err := wait(strings.Split(*brokers, ","), ids, *timeout, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "brokerready:", err)
		os.Exit(1)
	}
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("node ID %q: %w", f, err)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

func wait(brokers []string, nodes []int32, timeout time.Duration, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for attempt := 1; ; attempt++ {
		if pid > 0 && syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("broker process %d exited", pid)
		}
		if last = probe(ctx, brokers, nodes); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (%d attempts): %w", timeout, attempt, last)
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, brokers []string, nodes []int32) error {
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
	if _, err := adm.DeleteTopics(pctx, topic); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil
	}
	md, err := adm.BrokerMetadata(pctx)
	if err != nil {
		return err
	}
	listed := md.Brokers.NodeIDs()
	for _, id := range nodes {
		if !slices.Contains(listed, id) {
			return fmt.Errorf("node %d not among the cluster's brokers %v yet", id, listed)
		}
	}
	return nil
}
