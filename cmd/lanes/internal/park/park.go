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
	"unicode"
	"unicode/utf8"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// help is "lanes park -h"; inspectHelp and releaseHelp are its commands'.
var (
	help = cli.Help{
		Name: "park",
		Args: "<command> [flags]",
		About: "Lists the sessions a consumer group has parked, or releases a held one. A lanes consumer with " +
			"parking on moves a session that keeps failing aside, to the park topic of its partition's topic " +
			"(the topic's name plus a suffix, .park by default), and retries it there while the partition " +
			"keeps flowing; a session whose park retries ran out is held until released.",
		Commands: []cli.Command{
			{Name: "inspect", About: "list the sessions a group has parked"},
			{Name: "release", About: "let a held session be retried again"},
		},
		Docs: "parking.md",
	}
	inspectHelp = cli.Help{
		Name: "park inspect",
		Args: "--brokers host:port --group GROUP [--topic TOPIC] [flags]",
		About: "Lists the sessions parked for GROUP on TOPIC (in its park topic, TOPIC plus --suffix), or on " +
			"every topic GROUP has commits for when --topic is left out (one without a park topic is named and skipped), " +
			"as GROUP's members would rebuild them: " +
			"each park partition from the group's committed park position to its end, the group's own entries " +
			"only. One line per session: partition, session, held or waiting, the number of parked records, " +
			"their source offsets (the first ten, then how many more; --all for every one), since when, and its " +
			"head's failed retries; for a held session, the source offset that was dead-lettered and the command " +
			"that releases it, to paste as is (its SASL secrets from $LANES_SASL_PASSWORD or $LANES_SASL_TOKEN). " +
			"It only reads.",
		Docs: "parking.md#inspecting",
	}
	releaseHelp = cli.Help{
		Name: "park release",
		Args: "--brokers host:port --group GROUP --topic TOPIC --session SESSION [flags]",
		About: "Lets a session held after its park retry budget was spent (ParkHold) be retried again: it " +
			"writes a release marker to the session's park partition; the member that owns the partition picks " +
			"it up within a few seconds (at most 5) and retries the session's parked head at once. Release it " +
			"once its dependency is back: a retry that spends the budget again holds it again.",
		Docs: "parking.md#releasing-a-held-session",
	}
)

// shown is how many parked offsets a line lists without --all.
const shown = 10

// Run is "lanes park": it inspects the parked sessions of a group or
// releases a held one.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		help.Print(stdout, nil)
		return nil
	case len(args) == 0:
		help.Print(stderr, nil)
		return errors.New("park: want a command: inspect or release")
	case args[0] != "inspect" && args[0] != "release":
		help.Print(stderr, nil)
		return fmt.Errorf("park: unknown command %q: want inspect or release", args[0])
	}
	cmd, h := args[0], inspectHelp
	if cmd == "release" {
		h = releaseHelp
	}
	fs := h.FlagSet()
	brokers := fs.String("brokers", "", "comma-separated Kafka brokers, `host:port`,... (required)")
	group := fs.String("group", "", "the consumer `GROUP` (required): its commits say where each park partition starts")
	suffix := fs.String("suffix", consumer.DefaultParkTopicSuffix, "the park topic `SUFFIX` (Config.Park.TopicSuffix)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	var topic, session *string
	var all *bool
	if cmd == "inspect" {
		topic = fs.String("topic", "", "the consumed (source) `TOPIC`; every topic the group has commits for when left out")
		all = fs.Bool("all", false, "list every parked offset of each session (without it, the first ten)")
	} else {
		topic = fs.String("topic", "", "the consumed (source) `TOPIC` (required)")
		session = fs.String("session", "", "the held `SESSION` (required)")
	}
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, h, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("park %s: %w", cmd, err)
	}
	switch {
	case *brokers == "":
		return fmt.Errorf("park %s: --brokers is required: the Kafka brokers, host:port[,host:port]", cmd)
	case *group == "":
		return fmt.Errorf("park %s: --group is required: the consumer group that parked the sessions", cmd)
	case cmd == "release" && *topic == "":
		return errors.New("park release: --topic is required: the consumed topic of the held session")
	case cmd == "release" && *session == "":
		return errors.New("park release: --session is required: the held session")
	case *timeout <= 0:
		return fmt.Errorf("park %s: --timeout %v: want a positive duration such as 30s", cmd, *timeout)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return fmt.Errorf("park %s: %w", cmd, err)
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
	rc := releaseCommand(*brokers, *group, *suffix, fs)
	sessions, records := 0, 0
	var inspected, unparked []string
	for _, t := range topics {
		parked, err := consumer.InspectParked(ctx, consumer.ParkTarget{Brokers: bs, Group: *group, Topic: t, TopicSuffix: *suffix, ClientOptions: opts})
		if *topic == "" && errors.Is(err, consumer.ErrTopicMissing) { // one of the group's topics, not parked: not an error
			fmt.Fprintf(stdout, "topic %s: no park topic %s%s (parking not used for it; or its park suffix is not %s: name it with --suffix)\n",
				t, t, *suffix, *suffix)
			unparked = append(unparked, t)
			continue
		}
		if err != nil {
			return fmt.Errorf("park inspect: brokers %s, topic %s%s: %w", *brokers, t, *suffix, err)
		}
		for _, p := range parked {
			fmt.Fprintln(stdout, line(p, rc, *all))
			records += len(p.Offsets)
		}
		sessions += len(parked)
		inspected = append(inspected, t)
	}
	fmt.Fprintln(stdout, summary(*group, sessions, records, inspected, unparked))
	if len(inspected) == 0 && len(unparked) > 0 {
		return fmt.Errorf("park inspect: brokers %s, group %s: none of its topics has a park topic of suffix %s: "+
			"name the group's park suffix with --suffix (or the group does not park)", *brokers, *group, *suffix)
	}
	return nil
}

// summary is inspect's last line: what it found, for group, on the topics
// inspected, and the topics of the group it skipped, with no park topic.
func summary(group string, sessions, records int, inspected, unparked []string) string {
	var of []string
	if len(inspected) > 0 {
		of = append(of, cli.Plural(len(inspected), "topic")+" "+strings.Join(inspected, ", "))
	}
	if len(unparked) > 0 {
		of = append(of, cli.Count(len(unparked), "topic")+" without a park topic: "+strings.Join(unparked, ", "))
	}
	return fmt.Sprintf("%s parked, %s (group %s, %s)", cli.Count(sessions, "session"), cli.Count(records, "record"), group, strings.Join(of, "; "))
}

// releaseCommand returns the command that releases a held session of
// topic, printed by inspect (given fs, its parsed flags) to be pasted as
// is: the brokers and group inspect was given, the topic and session,
// the suffix when it is not the default, and the connection flags given
// (--tls*, --sasl-mechanism, --sasl-user), each value quoted for a POSIX
// shell when it needs it. The secrets (--sasl-password, --sasl-token) are
// left out: the pasted command takes them from $LANES_SASL_PASSWORD and
// $LANES_SASL_TOKEN.
func releaseCommand(brokers, group, suffix string, fs *flag.FlagSet) func(topic, session string) string {
	tail := ""
	if suffix != consumer.DefaultParkTopicSuffix {
		tail = " --suffix " + shellQuote(suffix)
	}
	fs.Visit(func(f *flag.Flag) { // the flags given, by name
		if !cli.IsSecurityFlag(f.Name) || f.Name == "sasl-password" || f.Name == "sasl-token" {
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if v := f.Value.String(); v != "true" {
				tail += " --" + f.Name + "=" + v
			} else {
				tail += " --" + f.Name
			}
			return
		}
		tail += " --" + f.Name + " " + shellQuote(f.Value.String())
	})
	head := "lanes park release --brokers " + shellQuote(brokers) + " --group " + shellQuote(group)
	note := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "sasl-password":
			note = " # set $LANES_SASL_PASSWORD first"
		case "sasl-token":
			note = " # set $LANES_SASL_TOKEN first"
		}
	})
	return func(topic, session string) string {
		return head + " --topic " + shellQuote(topic) + " --session " + shellQuote(session) + tail + note
	}
}

// shellQuote is s as one word of a POSIX shell: as is when it has only
// characters no shell treats specially, in single quotes otherwise.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printable reports whether s is valid UTF-8 with every rune printable
// (spaces included): safe to print raw on a terminal.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// line is one parked session as inspect lists it; release is the command
// that releases a held session (releaseCommand).
func line(p consumer.ParkedSession, release func(topic, session string) string, all bool) string {
	offs := p.Offsets
	more := ""
	if len(offs) > shown && !all {
		offs, more = offs[:shown], fmt.Sprintf(" and %d more", len(p.Offsets)-shown)
	}
	state := "waiting"
	if p.Held {
		how := release(p.Topic, p.Session)
		switch {
		case strings.ContainsRune(p.Session, 0):
			how = "with consumer.ReleaseHeld from Go (a session name with a NUL byte, such as a keyless lane's, cannot be passed on a command line)"
		case !printable(p.Session):
			how = "with consumer.ReleaseHeld from Go (a session name with control characters, quoted above, is not printed raw as a command: it could rewrite the terminal or the line pasted)"
		}
		state = fmt.Sprintf("held (source offset %d dead-lettered; release: %s)", p.HeldThrough, how)
	}
	since := "-"
	if !p.Since.IsZero() {
		since = p.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s/%d\tsession %q\t%s\t%s\toffsets %v%s\tsince %s\t%s failed",
		p.Topic, p.Partition, p.Session, state, cli.Count(len(p.Offsets), "record"), offs, more, since, cli.Count(p.Retries, "retry"))
}

// release writes the release marker of a held session.
func release(ctx context.Context, stdout io.Writer, brokers []string, group, topic, suffix, session string, opts []kgo.Opt) error {
	held, err := consumer.ReleaseHeld(ctx, consumer.ParkTarget{Brokers: brokers, Group: group, Topic: topic, TopicSuffix: suffix, ClientOptions: opts}, session)
	if err != nil {
		return fmt.Errorf("park release: brokers %s: %w", strings.Join(brokers, ","), err)
	}
	for _, p := range held {
		fmt.Fprintf(stdout, "released session %q on %s/%d (%s parked; source offset %d was dead-lettered): its owner retries it within 5 s\n",
			p.Session, p.Topic, p.Partition, cli.Count(len(p.Offsets), "record"), p.HeldThrough)
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
