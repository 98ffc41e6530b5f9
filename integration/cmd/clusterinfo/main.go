// Command clusterinfo answers kafka.sh's questions about a running cluster:
//
//	clusterinfo -brokers ADDRS leader TOPIC PARTITION   the node ID leading the partition
//	clusterinfo -brokers ADDRS controller               the node ID of the active controller
//	clusterinfo -brokers ADDRS under-replicated         partitions missing in-sync replicas, one a line
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lanesdev/lanes/integration/internal/clusterinfo"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "comma-separated brokers")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	if err := run(strings.Split(*brokers, ","), *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "clusterinfo:", err)
		os.Exit(1)
	}
}

func run(brokers []string, timeout time.Duration, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	switch {
	case len(args) == 3 && args[0] == "leader":
		p, err := strconv.ParseInt(args[2], 10, 32)
		if err != nil {
			return fmt.Errorf("partition %q: want a number: %w", args[2], err)
		}
		id, err := clusterinfo.Leader(ctx, cl, args[1], int32(p))
		if err != nil {
			return err
		}
		fmt.Println(id)
	case len(args) == 1 && args[0] == "controller":
		id, err := clusterinfo.Controller(ctx, cl)
		if err != nil {
			return err
		}
		fmt.Println(id)
	case len(args) == 1 && args[0] == "under-replicated":
		parts, err := clusterinfo.UnderReplicated(ctx, cl)
		if err != nil {
			return err
		}
		for _, p := range parts {
			fmt.Println(p)
		}
	default:
		return fmt.Errorf("usage: clusterinfo -brokers ADDRS leader TOPIC PARTITION | controller | under-replicated (got %q)", args)
	}
	return nil
}
