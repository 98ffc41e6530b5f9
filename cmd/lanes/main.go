package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `lanes: per-session ordered Kafka pipelines

Usage:
  lanes demo   [flags]   run the chat demo (embedded broker unless --brokers)
  lanes bench  [flags]   compare lanes with baselines on workloads (embedded broker unless --brokers)
  lanes broker [flags]   run an embedded Kafka-compatible broker (kfake)
  lanes dlq inspect|replay [flags]   list or re-send dead-lettered records
  lanes park inspect [flags]         list parked sessions (docs/parking.md)

Run "lanes <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "lanes:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "broker":
		return runBroker(ctx, args[1:], stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], stdout, stderr)
	case "park":
		return runPark(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
