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
	"github.com/lanesdev/lanes/cmd/lanes/internal/demo"
	"github.com/lanesdev/lanes/cmd/lanes/internal/dlq"
	"github.com/lanesdev/lanes/cmd/lanes/internal/park"
	"github.com/lanesdev/lanes/cmd/lanes/internal/topics"
)

const usage = `lanes: per-session ordered Kafka pipelines

Usage:
  lanes demo   [flags]   run the chat demo (embedded broker unless --brokers)
  lanes bench  [flags]   compare lanes with baselines on workloads (embedded broker unless --brokers)
  lanes broker [flags]   run an embedded Kafka-compatible broker (kfake)
  lanes dlq inspect|replay [flags]   list or re-send dead-lettered records
  lanes version          print the lanes version and the Go version that built it
  lanes park inspect [flags]         list parked sessions (docs/parking.md)
  lanes topics create|check [flags]  create or check a consumer's dead-letter and park topics

Run "lanes <command> -h" for a command's flags.
`

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
		fmt.Fprint(stderr, usage)
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
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
