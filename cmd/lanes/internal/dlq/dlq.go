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

// help is "lanes dlq -h"; inspectHelp and replayHelp are its commands'.
var (
	help = cli.Help{
		Name: "dlq",
		Args: "<command> [flags]",
		About: "Lists or re-sends the records a lanes consumer dead-lettered: the copies in its dead-letter " +
			"topic, with lanes-dlq-* headers saying where each came from and why. The topic is read from its " +
			"start to the end it has when the command starts, its committed records only (a transactional " +
			"consumer's copies of aborted transactions are not dead letters).",
		Commands: []cli.Command{
			{Name: "inspect", About: "list the dead-lettered records and count them by reason"},
			{Name: "replay", About: "send them back to their source topic (or another)"},
		},
		Docs: "demo.md",
	}
	inspectHelp = cli.Help{
		Name: "dlq inspect",
		Args: "--brokers host:port --topic DLQ [flags]",
		About: "Lists the dead-lettered records of the dead-letter topic DLQ: where each sits in it " +
			"(PARTITION/OFFSET, the first field of each line), when it was dead-lettered, where it came from " +
			"and why, then the count of records per reason. It only reads.",
		Docs: "demo.md",
	}
	replayHelp = cli.Help{
		Name: "dlq replay",
		Args: "--brokers host:port --topic DLQ [flags]",
		About: "Sends the records of the dead-letter topic DLQ back to their source topic (or --to), with the " +
			"same key, value and headers, so the same event ID, minus the lanes-dlq-* headers, each on its " +
			"session's partition as lanes' producer places it (the scheme of its lanes-placement header, jump " +
			"or kafka, over the topic's partition count now, stamped again); --reason, --session and their " +
			"--skip-* forms choose which. The topic is read up to the end it has at the start, its committed " +
			"records only, so replaying never loops. --rate caps the records sent a second. The replay's progress is " +
			"kept in a consumer group of its own (one per selection): stopped (Ctrl-C) or failed, the same " +
			"command goes on after the last record sent, and a second run of a finished one sends nothing again. " +
			"--dry-run checks the targets and prints what would be sent.",
		Docs: "demo.md",
	}
)

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
	fs.StringVar(&f.brokers, "brokers", "", "comma-separated Kafka brokers, `host:port`,... (required)")
	fs.StringVar(&f.topic, "topic", "", "the dead-letter topic, `DLQ` (required)")
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

// Run is "lanes dlq": it inspects or replays a dead-letter topic.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		help.Print(stderr, nil)
		return errors.New("dlq: want a command: inspect or replay")
	}
	var err error
	switch args[0] {
	case "inspect":
		err = runInspect(ctx, args[1:], stdout)
	case "replay":
		err = runReplay(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		help.Print(stdout, nil)
		return nil
	default:
		help.Print(stderr, nil)
		return fmt.Errorf("dlq: unknown command %q: want inspect or replay", args[0])
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("dlq %s: %w", args[0], err)
	}
	return err
}

func runInspect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := inspectHelp.FlagSet()
	var f dlqFlags
	f.register(fs)
	limit := fs.Int("limit", 0, "print at most N records (0: all); the counts at the end cover all")
	values := fs.Bool("values", false, "print each record's value too (quoted)")
	if err := cli.Parse(fs, inspectHelp, args, stdout); err != nil {
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

func runReplay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := replayHelp.FlagSet()
	var f dlqFlags
	f.register(fs)
	var sel Selection
	fs.StringVar(&sel.To, "to", "", "send to `TOPIC` instead of each record's source topic")
	fs.Var((*listFlag)(&sel.Reasons), "reason", "only the records whose lanes-dlq-reason is `REASON` (repeat, or commas): "+reasonList())
	fs.Var((*listFlag)(&sel.SkipReasons), "skip-reason", "not the records dead-lettered for `REASON` (repeat, or commas)")
	fs.Var((*listFlag)(&sel.Sessions), "session", "only the records of `SESSION` (their key; repeat, or commas)")
	fs.Var((*listFlag)(&sel.SkipSessions), "skip-session", "not the records of `SESSION` (repeat, or commas)")
	dry := fs.Bool("dry-run", false, "check the target topics exist and print what would be sent; send nothing")
	perSecond := fs.Float64("rate", 0, "send at most `N` records a second (0: as fast as the brokers take them)")
	group := fs.String("group", "", "the consumer `GROUP` that keeps the replay's progress (default: lanes-replay.DLQ. and a hash of the selection)")
	fromStart := fs.Bool("from-start", false, "ignore the progress of an earlier run of this selection: send every selected record")
	every := fs.Duration("progress", 5*time.Second, "print progress this often on a long replay (0: never)")
	if err := cli.Parse(fs, replayHelp, args, stdout); err != nil {
		return err
	}
	opts, err := f.validate()
	if err != nil {
		return err
	}
	for flag, rs := range map[string][]string{"--reason": sel.Reasons, "--skip-reason": sel.SkipReasons} {
		for _, r := range rs {
			if !consumer.Reason(r).Valid() {
				return fmt.Errorf("%s %q: want one of %s", flag, r, reasonList())
			}
		}
	}
	if _, err := replayGap("--rate", *perSecond); err != nil {
		return err
	}
	recs, err := readDLQ(ctx, f, opts)
	if err != nil {
		return err
	}
	return replay(ctx, stdout, f, opts, recs, sel, *group, *fromStart, *dry, *perSecond, *every)
}

// listFlag is a repeatable flag whose values may also be separated by
// commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
