package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/twmb/franz-go/pkg/kfake"
)

// brokerHelp is "lanes broker -h".
var brokerHelp = cli.Help{
	Name: "broker",
	Args: "[flags]",
	About: "Runs an embedded Kafka-compatible broker (kfake) on 127.0.0.1 until interrupted, for development: " +
		"point a service and its tests at it. Everything is kept in memory: stopping it loses every topic, " +
		"record and committed offset. lanes' clients never create a topic: seed them with --topics, or create " +
		"a consumer's with lanes topics create.",
	Docs: "tutorial.md#run-it",
}

// runBroker serves an embedded kfake broker on loopback until ctx ends.
func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := brokerHelp.FlagSet()
	port := fs.Int("port", 9092, "port to listen on, on 127.0.0.1 (0: any free port)")
	partitions := fs.Int("partitions", 12, "partitions of each topic of --topics")
	topics := fs.String("topics", "", "comma-separated `TOPICS` to create at start (lanes' clients never create one)")
	if err := cli.Parse(fs, brokerHelp, args, stdout); err != nil {
		return err
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("--port %d: want 0 (any free port) to 65535", *port)
	}
	if *partitions < 1 || *partitions > 1<<20 {
		return fmt.Errorf("--partitions %d: want at least 1", *partitions)
	}
	var names []string
	for t := range strings.SplitSeq(*topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			names = append(names, t)
		} else if *topics != "" {
			return fmt.Errorf("--topics %q: an empty topic name", *topics)
		}
	}
	c, err := startBroker(*port, int32(*partitions), names)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "embedded broker listening on %s (Ctrl-C to stop)\n", strings.Join(c.ListenAddrs(), ","))
	for _, t := range names {
		fmt.Fprintf(stdout, "created topic %s (%s)\n", t, cli.Count(*partitions, "partition"))
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "no topics created: lanes' producer and consumer never create a topic (a consumer stays not ready, naming the missing ones); "+
			"restart with --topics a,b, or create a consumer's topics with: lanes topics create --brokers %s --group GROUP --topic TOPIC --partitions %d --dlq TOPIC-dlq\n",
			c.ListenAddrs()[0], *partitions)
	}
	fmt.Fprintln(stdout, "everything is kept in memory: stopping the broker loses every topic, record and committed offset; "+
		"started again with the same topics, they are new topics (new topic IDs), which running lanes consumers re-subscribe to by themselves")
	<-ctx.Done()
	return nil
}

// startBroker starts the embedded broker on 127.0.0.1:port with topics,
// each of partitions partitions. A client that asks for it in its metadata
// requests (kcat, for one) creates a topic by using it; lanes' clients never
// ask.
func startBroker(port int, partitions int32, topics []string) (*kfake.Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.AllowAutoTopicCreation()}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start the embedded broker on 127.0.0.1:%d: %w (is the port in use? pick another with --port)", port, err)
	}
	return c, nil
}
