// Package topics is "lanes topics": it creates, or checks, the topics a
// consumer needs (consumer.CreateTopics; docs/parking.md).
package topics

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
)

// help is "lanes topics -h"; createHelp and checkHelp are its commands'.
var (
	help = cli.Help{
		Name: "topics",
		Args: "<command> [flags]",
		About: "Creates, or checks, the topics a lanes consumer with the given settings needs besides those it " +
			"consumes: its dead-letter topic and, with --park, the park topic of each consumed topic, and with --control, the control topic. One line " +
			"per topic: ok, created, would create (--dry-run), missing, or wrong with what is wrong and how to " +
			"fix it. The command fails when a topic is missing or wrong.",
		Commands: []cli.Command{
			{Name: "create", About: "create the topics that are missing and check those that exist"},
			{Name: "check", About: "check the topics and create nothing"},
		},
		Docs: "parking.md#creating-the-topics",
	}
	createHelp = cli.Help{
		Name: "topics create",
		Args: "--brokers host:port --group GROUP --topic TOPIC [flags]",
		About: "Makes the topics a consumer with these settings needs, and checks those that exist: the " +
			"dead-letter topic (--dlq; by default with as many partitions as the largest consumed topic) and, " +
			"with --park, the park topic of each consumed topic (TOPIC plus --park-suffix) with that topic's " +
			"partition count; both with cleanup.policy=delete. A consumed topic must exist: it is created only " +
			"with --partitions N. Running create again changes nothing that is right. One line per topic; the " +
			"command fails when a topic is missing or wrong.",
		Docs: "parking.md#creating-the-topics",
	}
	checkHelp = cli.Help{
		Name: "topics check",
		Args: "--brokers host:port --group GROUP --topic TOPIC [flags]",
		About: "Checks the topics a consumer with these settings needs, as create does, and creates nothing: " +
			"each consumed topic, the dead-letter topic (--dlq) and, with --park, the park topic of each " +
			"consumed topic (TOPIC plus --park-suffix). One line per topic: ok, missing, or wrong with what is " +
			"wrong and how to fix it; the command fails when a topic is missing or wrong.",
		Docs: "parking.md#creating-the-topics",
	}
)

// DefaultTimeout bounds a topics command's talk with the brokers
// (--timeout).
const DefaultTimeout = time.Minute

// topicList is a repeatable --topic; each value may also be a
// comma-separated list.
type topicList []string

func (l *topicList) String() string { return strings.Join(*l, ",") }

func (l *topicList) Set(v string) error {
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t == "" {
			return errors.New("empty topic name")
		}
		*l = append(*l, t)
	}
	return nil
}

// Run is "lanes topics": create or check.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		help.Print(stdout, nil)
		return nil
	case len(args) == 0 || (args[0] != "create" && args[0] != "check"):
		help.Print(stderr, nil)
		if len(args) == 0 {
			return errors.New("topics: want a command: create or check")
		}
		return fmt.Errorf("topics: unknown command %q: want create or check", args[0])
	}
	err := run(ctx, args[0], args[1:], stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("topics %s: %w", args[0], err)
	}
	return err
}

func run(ctx context.Context, cmd string, args []string, stdout io.Writer) error {
	create, h := cmd == "create", checkHelp
	if create {
		h = createHelp
	}
	fs := h.FlagSet()
	var topics topicList
	brokers := fs.String("brokers", "", "comma-separated Kafka brokers, `host:port`,... (required)")
	group := fs.String("group", "", "the consumer `GROUP` (required; Config.Group)")
	fs.Var(&topics, "topic", "a consumed `TOPIC` (required; repeat the flag, or separate with commas, for several)")
	dlq := fs.String("dlq", "", "the dead-letter topic, `DLQ` (Config.DeadLetterTopic); none without it (a consumer with Retry.Forever)")
	park := fs.Bool("park", false, "parking is on (Config.Park.Enabled): each consumed topic needs its park topic")
	suffix := fs.String("park-suffix", consumer.DefaultParkTopicSuffix, "the park topic `SUFFIX` (Config.Park.TopicSuffix); with --park")
	ctl := fs.Bool("control", false, "per-session control is on (Config.Control.Enabled): the group needs the control topic (one partition, compacted)")
	ctlTopic := fs.String("control-topic", consumer.DefaultControlTopic, "the control `TOPIC` (Config.Control.Topic); with --control")
	dlqParts := fs.Int("dlq-partitions", 0, "partitions of the dead-letter topic when created (0: as many as the largest consumed topic)")
	timeout := fs.Duration("timeout", DefaultTimeout, "give up when the brokers have not answered within this long")
	var partitions, replication *int
	var dry *bool
	if create {
		partitions = fs.Int("partitions", 0, "create a missing consumed topic with N partitions (0: a missing consumed topic is an error)")
		replication = fs.Int("replication-factor", -1, "N replicas of each partition of the topics created (-1: the brokers' default.replication.factor)")
		dry = fs.Bool("dry-run", false, "create nothing: the brokers validate each creation, and each line says what would be created")
	}
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, h, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *brokers == "":
		return errors.New("--brokers is required: the Kafka brokers, host:port[,host:port]")
	case *group == "":
		return errors.New("--group is required: the consumer group whose topics these are")
	case len(topics) == 0:
		return errors.New("--topic is required: a consumed topic (repeat it for several)")
	case set["park-suffix"] && !*park:
		return errors.New("--park-suffix needs --park")
	case *park && *suffix == "":
		return errors.New("--park-suffix: empty: a park topic needs a name of its own")
	case set["control-topic"] && !*ctl:
		return errors.New("--control-topic needs --control")
	case *dlqParts < 0:
		return fmt.Errorf("--dlq-partitions %d: want 1 or more (0: as many as the largest consumed topic)", *dlqParts)
	case set["dlq-partitions"] && *dlq == "":
		return errors.New("--dlq-partitions needs --dlq")
	case *timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration such as 30s", *timeout)
	case create && *partitions < 0:
		return fmt.Errorf("--partitions %d: want 1 or more (0: do not create consumed topics)", *partitions)
	case create && (*replication == 0 || *replication < -1 || *replication > 32767):
		return fmt.Errorf("--replication-factor %d: want 1 or more, or -1 for the brokers' default", *replication)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return err
	}
	cfg := consumer.Config{
		Brokers:         strings.Split(*brokers, ","),
		Group:           *group,
		Topics:          topics,
		DeadLetterTopic: *dlq,
		Retry:           consumer.RetryPolicy{Forever: *dlq == ""}, // a consumer without a dead-letter topic retries forever
		ClientOptions:   opts,
	}
	if *park { // a policy with values but off is refused
		cfg.Park = consumer.ParkPolicy{Enabled: true, TopicSuffix: *suffix}
	}
	if *ctl {
		cfg.Control = consumer.ControlPolicy{Enabled: true, Topic: *ctlTopic}
	}
	var topts []consumer.TopicOption
	if *dlqParts > 0 {
		topts = append(topts, consumer.TopicsDeadLetterPartitions(int32(*dlqParts)))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ensure := consumer.CheckTopics
	if create {
		if *partitions > 0 {
			topts = append(topts, consumer.TopicsCreateConsumed(int32(*partitions)))
		}
		if *replication != -1 {
			topts = append(topts, consumer.TopicsReplicationFactor(int16(*replication)))
		}
		if *dry {
			topts = append(topts, consumer.TopicsDryRun())
		}
		ensure = consumer.CreateTopics
	}
	results, err := ensure(ctx, cfg, topts...)
	if results == nil && err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("brokers %s did not answer within %v: check that they are up and reachable (and the --tls/--sasl flags): %w",
				*brokers, *timeout, err)
		}
		return err
	}
	return report(stdout, results)
}

// report prints one line per topic and a count of each state; its error
// says how many are missing or wrong.
func report(w io.Writer, results []consumer.TopicResult) error {
	counts := map[consumer.TopicState]int{}
	for _, r := range results {
		fmt.Fprintln(w, r)
		counts[r.State]++
	}
	var parts []string
	for _, s := range []consumer.TopicState{consumer.TopicOK, consumer.TopicCreated, consumer.TopicWouldCreate,
		consumer.TopicMissing, consumer.TopicWrong} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	fmt.Fprintf(w, "%s: %s\n", cli.Count(len(results), "topic"), strings.Join(parts, ", "))
	if bad := counts[consumer.TopicMissing] + counts[consumer.TopicWrong]; bad > 0 {
		return fmt.Errorf("%d of %s missing or wrong (see above)", bad, cli.Count(len(results), "topic"))
	}
	return nil
}
