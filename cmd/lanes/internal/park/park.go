// Package park is "lanes park": it lists the sessions parked for a group
// and releases a held one (docs/parking.md).
package park

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Usage is "lanes park -h".
const Usage = `Usage:
  lanes park inspect --brokers host:port --group GROUP [--topic TOPIC] [--suffix .park] [--all] [--timeout 1m]
  lanes park release --brokers host:port --group GROUP --topic TOPIC --session SESSION [--suffix .park] [--timeout 1m]

inspect lists the sessions parked for GROUP on TOPIC (in its park topic,
TOPIC plus --suffix), or on every topic GROUP has commits for when --topic
is left out, as GROUP's members would rebuild them: each park partition
from the group's committed park position to its end, the group's own
entries only. One line per session: partition, session, held or waiting,
the number of parked records, their source offsets (the first ten, then
how many more; --all for every one), since when, and its head's failed
retries; for a held session, the source offset that was dead-lettered and
the command that releases it. It only reads.

release lets a session held after its park retry budget was spent
(ParkHold) be retried again: it writes a release marker to the session's
park partition; the member that owns the partition picks it up within a
few seconds (at most 5) and retries the session's parked head at once.
Release it once its dependency is back: a retry that spends the budget
again holds it again.
`

// shown is how many parked offsets a line lists without --all.
const shown = 10

// Run is "lanes park": it inspects the parked sessions of a group or
// releases a held one.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprint(stdout, Usage)
		return nil
	case len(args) == 0 || (args[0] != "inspect" && args[0] != "release"):
		fmt.Fprint(stderr, Usage)
		return errors.New("park: want a command: inspect or release")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("park "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated brokers (required)")
	group := fs.String("group", "", "the consumer group (required): its commits say where each park partition starts")
	topic := fs.String("topic", "", "the consumed (source) topic (inspect: every topic the group has commits for when empty)")
	suffix := fs.String("suffix", consumer.DefaultParkTopicSuffix, "the park topic suffix (Config.Park.TopicSuffix)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	session := fs.String("session", "", "release: the held session (required)")
	all := fs.Bool("all", false, "inspect: list every parked offset of each session")
	var sec cli.Security
	sec.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("park %s: unexpected argument %q: it takes only flags", cmd, fs.Arg(0))
	case *brokers == "":
		return fmt.Errorf("park %s: --brokers is required", cmd)
	case *group == "":
		return fmt.Errorf("park %s: --group is required", cmd)
	case cmd == "release" && *topic == "":
		return errors.New("park release: --topic is required")
	case cmd == "release" && *session == "":
		return errors.New("park release: --session is required")
	case cmd == "inspect" && *session != "":
		return errors.New("park inspect: --session is for release; inspect lists every parked session")
	case *timeout <= 0:
		return fmt.Errorf("park %s: --timeout %v: want a positive duration", cmd, *timeout)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return fmt.Errorf("park: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	bs := strings.Split(*brokers, ",")
	if cmd == "release" {
		return release(ctx, stdout, bs, *group, *topic, *suffix, *session, opts)
	}
	topics := []string{*topic}
	if *topic == "" {
		if topics, err = groupTopics(ctx, bs, *group, opts); err != nil {
			return fmt.Errorf("park inspect: brokers %s, group %s: %w", *brokers, *group, err)
		}
	}
	sessions, records := 0, 0
	for _, t := range topics {
		parked, err := consumer.InspectParked(ctx, consumer.ParkTarget{Brokers: bs, Group: *group, Topic: t, TopicSuffix: *suffix, ClientOptions: opts})
		if err != nil {
			return fmt.Errorf("park inspect: brokers %s, topic %s%s: %w", *brokers, t, *suffix, err)
		}
		for _, p := range parked {
			fmt.Fprintln(stdout, line(p, *group, *all))
			records += len(p.Offsets)
		}
		sessions += len(parked)
	}
	fmt.Fprintf(stdout, "%s parked, %s (group %s, %s %s)\n", count(sessions, "session"), count(records, "record"), *group,
		plural(len(topics), "topic"), strings.Join(topics, ", "))
	return nil
}

// line is one parked session as inspect lists it.
func line(p consumer.ParkedSession, group string, all bool) string {
	offs := p.Offsets
	more := ""
	if len(offs) > shown && !all {
		offs, more = offs[:shown], fmt.Sprintf(" and %d more", len(p.Offsets)-shown)
	}
	state := "waiting"
	if p.Held {
		state = fmt.Sprintf("held (source offset %d dead-lettered; release: lanes park release --group %s --topic %s --session %q)",
			p.HeldThrough, group, p.Topic, p.Session)
	}
	since := "-"
	if !p.Since.IsZero() {
		since = p.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s/%d\tsession %q\t%s\t%s\toffsets %v%s\tsince %s\t%s failed",
		p.Topic, p.Partition, p.Session, state, count(len(p.Offsets), "record"), offs, more, since, count(p.Retries, "retry"))
}

// release writes the release marker of a held session.
func release(ctx context.Context, stdout io.Writer, brokers []string, group, topic, suffix, session string, opts []kgo.Opt) error {
	held, err := consumer.ReleaseHeld(ctx, consumer.ParkTarget{Brokers: brokers, Group: group, Topic: topic, TopicSuffix: suffix, ClientOptions: opts}, session)
	if err != nil {
		return fmt.Errorf("park release: brokers %s: %w", strings.Join(brokers, ","), err)
	}
	for _, p := range held {
		fmt.Fprintf(stdout, "released session %q on %s/%d (%s parked; source offset %d was dead-lettered): its owner retries it within 5 s\n",
			p.Session, p.Topic, p.Partition, count(len(p.Offsets), "record"), p.HeldThrough)
	}
	return nil
}

// groupTopics are the topics group has committed offsets for, sorted.
func groupTopics(ctx context.Context, brokers []string, group string, opts []kgo.Opt) ([]string, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	var topics []string
	offs.Each(func(o kadm.OffsetResponse) {
		if !slices.Contains(topics, o.Topic) {
			topics = append(topics, o.Topic)
		}
	})
	if len(topics) == 0 {
		return nil, errors.New("the group has no committed offsets: name the topic with --topic")
	}
	slices.Sort(topics)
	return topics, nil
}

// count is n and noun, in the plural unless n is 1: "1 record", "2 records".
func count(n int, noun string) string { return fmt.Sprintf("%d %s", n, plural(n, noun)) }

// plural is noun for n of it: "retry" becomes "retries".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return noun
	case strings.HasSuffix(noun, "y"):
		return strings.TrimSuffix(noun, "y") + "ies"
	}
	return noun + "s"
}
