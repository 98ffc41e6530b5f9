package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lanesdev/lanes/cmd/lanes/internal/bench"
	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/cmd/lanes/internal/demo"
	"github.com/lanesdev/lanes/cmd/lanes/internal/dlq"
	"github.com/lanesdev/lanes/cmd/lanes/internal/park"
	"github.com/lanesdev/lanes/cmd/lanes/internal/topics"
)

// help is "lanes -h".
var help = cli.Help{
	Args: "<command> [flags]",
	About: "lanes is the command line of lanes, Kafka consumers that keep each session's messages in order: " +
		"a demo and a benchmark that run on an embedded broker (or a real cluster with --brokers), an embedded " +
		"broker for development, and the tools a consumer's operator needs on a real cluster: its topics, its " +
		"dead-lettered records and its parked sessions.",
	Commands: []cli.Command{
		{Name: "demo", About: "run the chat demo: faults injected, order and loss checked"},
		{Name: "bench", About: "compare lanes with baselines on workloads"},
		{Name: "broker", About: "run an embedded Kafka-compatible broker (kfake)"},
		{Name: "topics", About: "create or check a consumer's dead-letter and park topics"},
		{Name: "dlq", About: "list or re-send dead-lettered records"},
		{Name: "park", About: "list the parked sessions of a group, or release a held one"},
		{Name: "version", About: "print the lanes version and the Go version that built it"},
	},
	Docs: "README.md",
}

func main() {
	// The consumers and producers the commands run log to slog.Default():
	// errors only, so that the demo's progress and the bench's tables are
	// not interleaved with a line per dead-lettered record.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode returns the process's exit status for run's error, printing it:
// 0 for none and for -h (the usage is printed; asking for help is no
// failure), 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "lanes:", err)
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		help.Print(stderr, nil)
		return errors.New("no command given")
	}
	switch args[0] {
	case "demo":
		return demo.Run(ctx, args[1:], stdout, stderr)
	case "bench":
		return bench.Run(ctx, args[1:], stdout, stderr)
	case "broker":
		return runBroker(ctx, args[1:], stdout, stderr)
	case "dlq":
		return dlq.Run(ctx, args[1:], stdout, stderr)
	case "park":
		return park.Run(ctx, args[1:], stdout, stderr)
	case "topics":
		return topics.Run(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		help.Print(stdout, nil)
		return nil
	}
	help.Print(stderr, nil)
	return fmt.Errorf("unknown command %q", args[0])
}
