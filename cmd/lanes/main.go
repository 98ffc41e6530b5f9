package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/cmd/lanes/internal/console"
	"github.com/lanesdev/lanes/cmd/lanes/internal/dlq"
	"github.com/lanesdev/lanes/cmd/lanes/internal/park"
	"github.com/lanesdev/lanes/cmd/lanes/internal/session"
	"github.com/lanesdev/lanes/cmd/lanes/internal/topics"
)

// help is "lanes -h".
var help = cli.Help{
	Args: "<command> [flags]",
	About: "lanes is the command line of lanes, Kafka consumers that keep each session's messages in order: " +
		"an embedded broker for development, and the tools a consumer's operator needs on a real cluster: its " +
		"topics, its dead-lettered records and its parked sessions. The chat demo and the benchmarks are a " +
		"program of their own, lanes-lab (lanes-lab demo, lanes-lab bench): " + labInstall() + ".",
	Commands: []cli.Command{
		{Name: "broker", About: "run an embedded Kafka-compatible broker (kfake)"},
		{Name: "topics", About: "create or check a consumer's dead-letter and park topics"},
		{Name: "dlq", About: "list or re-send dead-lettered records"},
		{Name: "park", About: "list the parked sessions of a group, or release a held one"},
		{Name: "session", About: "pause, resume or rate-limit one session of a group; list those controlled"},
		{Name: "console", About: "serve a web page of a group across its members: partitions, lag, parked, paused, dead letters"},
		{Name: "version", About: "print the lanes version and the Go version that built it"},
	},
	Docs: "README.md",
}

// labInstall is how to get lanes-lab, which has the commands demo and
// bench (lanes demo and lanes bench before v0.2.0), at this binary's
// version when it is a release (@latest for a build from a checkout, whose
// version, "(devel)" or a pseudo-version with +dirty, go install cannot
// take).
func labInstall() string {
	v := moduleVersion()
	if !strings.HasPrefix(v, "v") || strings.ContainsAny(v, "-+") { // not vX.Y.Z: a pseudo-version, a pre-release, +dirty
		v = "latest"
	}
	return "go install github.com/lanesdev/lanes/cmd/lanes/lanes-lab@" + v
}

func main() { cli.Main("lanes", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		help.Print(stderr, nil)
		return errors.New("no command given")
	}
	switch args[0] {
	case "broker":
		return runBroker(ctx, args[1:], stdout, stderr)
	case "dlq":
		return dlq.Run(ctx, args[1:], stdout, stderr)
	case "park":
		return park.Run(ctx, args[1:], stdout, stderr)
	case "session":
		return session.Run(ctx, args[1:], stdout, stderr)
	case "console":
		return console.Run(ctx, args[1:], stdout, stderr)
	case "topics":
		return topics.Run(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		help.Print(stdout, nil)
		return nil
	case "demo", "bench":
		return fmt.Errorf("unknown command %q: it is lanes-lab %s now (%s)", args[0], args[0], labInstall())
	}
	help.Print(stderr, nil)
	return fmt.Errorf("unknown command %q", args[0])
}
