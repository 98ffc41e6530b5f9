package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lanesdev/lanes/consumer"
)

const parkUsage = `Usage:
  lanes park inspect --brokers host:port --group GROUP --topic TOPIC [--suffix .park]

inspect lists the sessions parked for TOPIC (in its park topic, TOPIC plus
--suffix) as GROUP's members would rebuild them: each park partition from
the group's committed park position to its end. One line per session:
partition, session, held or waiting, the number of parked records, the
source offsets of the first ones, and since when. It only reads.
`

// runPark inspects the parked sessions of a topic (docs/parking.md).
func runPark(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "inspect" {
		fmt.Fprint(stderr, parkUsage)
		return errors.New("park: want inspect")
	}
	fs := flag.NewFlagSet("park inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated brokers (required)")
	group := fs.String("group", "", "the consumer group (required): its commits say where each park partition starts")
	topic := fs.String("topic", "", "the consumed (source) topic (required)")
	suffix := fs.String("suffix", consumer.DefaultParkTopicSuffix, "the park topic suffix (Config.Park.TopicSuffix)")
	var sec security
	sec.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *brokers == "" || *group == "" || *topic == "" {
		return errors.New("park: --brokers, --group and --topic are required")
	}
	opts, err := sec.clientOpts(true)
	if err != nil {
		return fmt.Errorf("park: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	parked, err := consumer.InspectParked(ctx, strings.Split(*brokers, ","), *group, *topic, *suffix, opts...)
	if err != nil {
		return fmt.Errorf("park: %w", err)
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
		fmt.Fprintf(stdout, "%s/%d\tsession %q\t%s\t%d records\toffsets %v\tsince %s\n",
			p.Topic, p.Partition, p.Session, state, len(p.Offsets), first, p.Since.UTC().Format(time.RFC3339))
		records += len(p.Offsets)
	}
	fmt.Fprintf(stdout, "%d sessions parked, %d records\n", len(parked), records)
	return nil
}
