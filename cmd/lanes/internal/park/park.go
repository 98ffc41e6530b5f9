// Package park is "lanes park": it lists the sessions parked for a topic
// (docs/parking.md).
package park

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

// Usage is "lanes park -h".
const Usage = `Usage:
  lanes park inspect --brokers host:port --group GROUP --topic TOPIC [--suffix .park] [--timeout 1m]

inspect lists the sessions parked for TOPIC (in its park topic, TOPIC plus
--suffix) as GROUP's members would rebuild them: each park partition from
the group's committed park position to its end. One line per session:
partition, session, held or waiting, the number of parked records, the
source offsets of the first ones, and since when. It only reads.
`

// Run is "lanes park": it inspects the parked sessions of a topic.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprint(stdout, Usage)
		return nil
	case len(args) == 0 || args[0] != "inspect":
		fmt.Fprint(stderr, Usage)
		return errors.New("park: want a command: inspect")
	}
	fs := flag.NewFlagSet("park inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated brokers (required)")
	group := fs.String("group", "", "the consumer group (required): its commits say where each park partition starts")
	topic := fs.String("topic", "", "the consumed (source) topic (required)")
	suffix := fs.String("suffix", consumer.DefaultParkTopicSuffix, "the park topic suffix (Config.Park.TopicSuffix)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	var sec cli.Security
	sec.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("park inspect: unexpected argument %q: it takes only flags", fs.Arg(0))
	case *brokers == "":
		return errors.New("park inspect: --brokers is required")
	case *group == "":
		return errors.New("park inspect: --group is required")
	case *topic == "":
		return errors.New("park inspect: --topic is required")
	case *timeout <= 0:
		return fmt.Errorf("park inspect: --timeout %v: want a positive duration", *timeout)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return fmt.Errorf("park: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	parked, err := consumer.InspectParked(ctx, strings.Split(*brokers, ","), *group, *topic, *suffix, opts...)
	if err != nil {
		return fmt.Errorf("park inspect: brokers %s, topic %s%s: %w", *brokers, *topic, *suffix, err)
	}
	records := 0
	for _, p := range parked {
		state := "waiting"
		if p.Held {
			state = "held"
		}
		first := p.Offsets
		if len(first) > 5 {
			first = first[:5]
		}
		fmt.Fprintf(stdout, "%s/%d\tsession %q\t%s\t%d records\toffsets %v\tsince %s\t%d retries failed\n",
			p.Topic, p.Partition, p.Session, state, len(p.Offsets), first, p.Since.UTC().Format(time.RFC3339), p.Retries)
		records += len(p.Offsets)
	}
	fmt.Fprintf(stdout, "%d sessions parked, %d records\n", len(parked), records)
	return nil
}
