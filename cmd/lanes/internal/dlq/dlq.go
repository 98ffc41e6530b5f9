package dlq

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kgo"
)

const dlqUsage = `Usage:
  lanes dlq inspect --brokers host:port --topic DLQ [--limit N] [--values] [--timeout D]
  lanes dlq replay  --brokers host:port --topic DLQ [--to TOPIC] [--reason R] [--dry-run] [--timeout D]

inspect lists the dead-lettered records: where each sits in the dead-letter
topic (PARTITION/OFFSET, the first field of each line), when it was
dead-lettered, where it came from and why.
replay sends them back to their source topic (or --to), same key, value and
headers (so the same event ID) minus the lanes-dlq-* headers; with --reason
only records dead-lettered for that reason. The DLQ is read up to its end at
the start, so replaying never loops.

Run "lanes dlq inspect -h" or "lanes dlq replay -h" for a command's flags.
`

// DefaultTimeout bounds a dlq command's talk with the brokers (--timeout).
const DefaultTimeout = time.Minute

// reasonList is every value of the lanes-dlq-reason header the consumer
// writes (--reason), from consumer.Reasons, so it cannot drift from them.
func reasonList() string {
	rs := consumer.Reasons()
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// dlqFlags are the flags both dlq commands take.
type dlqFlags struct {
	brokers string
	topic   string
	timeout time.Duration
	sec     cli.Security
}

func (f *dlqFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.brokers, "brokers", "", "comma-separated Kafka brokers, host:port (required)")
	fs.StringVar(&f.topic, "topic", "", "the dead-letter topic (required)")
	fs.DurationVar(&f.timeout, "timeout", DefaultTimeout, "give up when the brokers have not answered within this long")
	f.sec.Register(fs)
}

// validate checks the common flags and returns the client options.
func (f *dlqFlags) validate() ([]kgo.Opt, error) {
	switch {
	case f.brokers == "":
		return nil, errors.New("--brokers is required: the Kafka brokers, host:port[,host:port]")
	case f.topic == "":
		return nil, errors.New("--topic is required: the dead-letter topic")
	case f.timeout <= 0:
		return nil, fmt.Errorf("--timeout %v: want a positive duration such as 30s", f.timeout)
	}
	opts, err := f.sec.ClientOpts(true)
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(strings.Split(f.brokers, ",")...)}, opts...), nil
}

// newFlagSet returns the flag set of "dlq <cmd>" with its usage line.
func newDLQFlagSet(cmd, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dlq "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  lanes dlq %s %s\n\nFlags:\n", cmd, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseDLQ parses args into fs and rejects arguments that are no flags.
func parseDLQ(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes only flags", fs.Arg(0), fs.Name())
	}
	return nil
}

// Run is "lanes dlq": it inspects or replays a dead-letter topic.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return errors.New("dlq: want a command: inspect or replay")
	}
	var err error
	switch args[0] {
	case "inspect":
		err = runInspect(ctx, args[1:], stdout, stderr)
	case "replay":
		err = runReplay(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, dlqUsage)
		return nil
	default:
		fmt.Fprint(stderr, dlqUsage)
		return fmt.Errorf("dlq: unknown command %q: want inspect or replay", args[0])
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("dlq %s: %w", args[0], err)
	}
	return err
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newDLQFlagSet("inspect", "--brokers host:port --topic DLQ [flags]", stderr)
	var f dlqFlags
	f.register(fs)
	limit := fs.Int("limit", 0, "print at most this many records (0: all); the counts at the end cover all")
	values := fs.Bool("values", false, "print each record's value too (quoted)")
	if err := parseDLQ(fs, args); err != nil {
		return err
	}
	opts, err := f.validate()
	if err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %d: want 0 (all) or more", *limit)
	}
	recs, err := readDLQ(ctx, f, opts)
	if err != nil {
		return err
	}
	inspect(stdout, f.topic, recs, *limit, *values)
	return nil
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newDLQFlagSet("replay", "--brokers host:port --topic DLQ [flags]", stderr)
	var f dlqFlags
	f.register(fs)
	to := fs.String("to", "", "send to this topic instead of each record's source topic")
	reason := fs.String("reason", "", "only records with this lanes-dlq-reason: "+reasonList())
	dry := fs.Bool("dry-run", false, "check the target topics exist and print what would be sent; send nothing")
	if err := parseDLQ(fs, args); err != nil {
		return err
	}
	opts, err := f.validate()
	if err != nil {
		return err
	}
	if *reason != "" && !consumer.Reason(*reason).Valid() {
		return fmt.Errorf("--reason %q: want one of %s", *reason, reasonList())
	}
	recs, err := readDLQ(ctx, f, opts)
	if err != nil {
		return err
	}
	return replay(ctx, stdout, f, opts, recs, *to, *reason, *dry)
}
