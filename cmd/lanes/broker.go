package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runBroker serves an embedded kfake broker on loopback until ctx ends.
func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 9092, "port to listen on (127.0.0.1)")
	partitions := fs.Int("partitions", 12, "partitions of each seeded topic")
	topics := fs.String("topics", "", "comma-separated topics to create at start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("--port %d: out of range", *port)
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port), kfake.AllowAutoTopicCreation()}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(stdout, "embedded broker listening on %s (Ctrl-C to stop)\n", strings.Join(c.ListenAddrs(), ","))
	<-ctx.Done()
	return nil
}
