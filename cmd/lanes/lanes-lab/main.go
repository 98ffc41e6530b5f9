package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lanesdev/lanes/cmd/lanes/internal/bench"
	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/cmd/lanes/internal/demo"
)

// help is "lanes-lab -h".
var help = cli.Help{
	Prog: "lanes-lab",
	Args: "<command> [flags]",
	About: "lanes-lab runs the chat demo and the benchmarks of lanes, Kafka consumers that keep each session's " +
		"messages in order, on an embedded broker (or a real cluster with --brokers). It is a program apart " +
		"from lanes, the operator's command line, so that lanes builds without the plotting, PostgreSQL, " +
		"Redis and OpenTelemetry SDK packages these two need.",
	Commands: []cli.Command{
		{Name: "demo", About: "run the chat demo: faults injected, order and loss checked"},
		{Name: "bench", About: "compare lanes with baselines on workloads"},
	},
	Docs: "demo.md",
}

func main() { cli.Main("lanes-lab", run) }

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
	case "-h", "-help", "--help", "help":
		help.Print(stdout, nil)
		return nil
	}
	help.Print(stderr, nil)
	return fmt.Errorf("unknown command %q", args[0])
}
