package cli

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
)

// RunFunc is a program's dispatcher: it runs the command args names,
// writing to stdout and stderr, until ctx ends.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main is the main function of the programs lanes and lanes-lab (prog):
// it runs run on the process's arguments until SIGINT or SIGTERM and
// exits with ExitCode's status.
func Main(prog string, run RunFunc) {
	// The consumers and producers the commands run log to slog.Default():
	// errors only, so that the demo's progress and the bench's tables are
	// not interleaved with a line per dead-lettered record.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ExitCode(prog, run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// ExitCode returns the process's exit status for a run's error, printing
// it after the program's name prog: 0 for none and for -h (the usage is
// printed; asking for help is no failure), 1 otherwise.
func ExitCode(prog string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, prog+":", err)
	return 1
}
