// Package session is "lanes session": it pauses, resumes and limits one
// session of a consumer group, and lists those paused or limited
// (docs/control.md).
package session

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

var (
	help = cli.Help{
		Name: "session",
		Args: "<command> [flags]",
		About: "Pauses, resumes or rate-limits one session of a consumer group, from any machine, without knowing " +
			"which member owns it: the setting goes to the group's control topic (lanes.control by default, made " +
			"when missing), which every member with Control.Enabled reads within Control.Interval (1 s by default). " +
			"A paused session's records wait in order (with parking on they are parked, so its partition moves on); " +
			"the pause holds across rebalances, restarts and deploys until it is resumed.",
		Commands: []cli.Command{
			{Name: "pause", About: "pause a session: its records wait until it is resumed"},
			{Name: "resume", About: "resume a paused session: its records run, in order"},
			{Name: "limit", About: "limit a session to a rate (records per second) with a burst; --rate 0 removes it"},
			{Name: "list", About: "list the sessions a group has paused or limited"},
		},
		Docs: "control.md",
	}
	helps = map[string]cli.Help{
		"pause": {Name: "session pause", Args: "--brokers host:port --group GROUP --topic TOPIC --session SESSION [--reason TEXT] [flags]",
			About: "Pauses SESSION of TOPIC for GROUP: within Control.Interval its owner starts none of its records; " +
				"they wait (or are parked, with parking on) until lanes session resume. A rate set before is kept.", Docs: "control.md#pause-and-resume"},
		"resume": {Name: "session resume", Args: "--brokers host:port --group GROUP --topic TOPIC --session SESSION [flags]",
			About: "Resumes a paused SESSION: its waiting records run in order, its parked ones are retried at once.", Docs: "control.md#pause-and-resume"},
		"limit": {Name: "session limit", Args: "--brokers host:port --group GROUP --topic TOPIC --session SESSION --rate N [--burst N] [flags]",
			About: "Limits SESSION to N records a second, in bursts of --burst (1 by default): its records wait in " +
				"their lane, without a worker, while the rest of its partition flows. --rate 0 removes the session's own " +
				"limit (Throttle.Session applies again). A pause is kept.", Docs: "control.md#throttling"},
		"list": {Name: "session list", Args: "--brokers host:port --group GROUP [flags]",
			About: "Lists the sessions GROUP has paused or limited, oldest setting first: topic, session, paused or " +
				"its rate, who set it, when and why. It only reads.", Docs: "control.md#listing"},
	}
)

// Run is "lanes session".
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		help.Print(stdout, nil)
		return nil
	case len(args) == 0:
		help.Print(stderr, nil)
		return errors.New("session: want a command: pause, resume, limit or list")
	}
	cmd := args[0]
	h, ok := helps[cmd]
	if !ok {
		help.Print(stderr, nil)
		return fmt.Errorf("session: unknown command %q: want pause, resume, limit or list", cmd)
	}
	fs := h.FlagSet()
	brokers := fs.String("brokers", "", "comma-separated Kafka brokers, `host:port`,... (required)")
	group := fs.String("group", "", "the consumer `GROUP` (required)")
	ctlTopic := fs.String("control-topic", consumer.DefaultControlTopic, "the control `TOPIC` (Config.Control.Topic)")
	by := fs.String("by", "", "who sets it, shown with the setting (default: user@host)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	var topic, session, reason *string
	var rate *float64
	var burst *int
	if cmd != "list" {
		topic = fs.String("topic", "", "the consumed `TOPIC` (required)")
		session = fs.String("session", "", "the `SESSION` (required): its records' key, or what Config.SessionKey returns")
	}
	if cmd == "pause" || cmd == "limit" {
		reason = fs.String("reason", "", "why, shown with the setting and in Health")
	}
	if cmd == "limit" {
		rate = fs.Float64("rate", -1, "records per `N` second (required; 0 removes the session's limit)")
		burst = fs.Int("burst", 0, "records at once after an idle time (default 1)")
	}
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, h, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("session %s: %w", cmd, err)
	}
	switch {
	case *brokers == "":
		return fmt.Errorf("session %s: --brokers is required: the Kafka brokers, host:port[,host:port]", cmd)
	case *group == "":
		return fmt.Errorf("session %s: --group is required: the consumer group whose session it is", cmd)
	case topic != nil && *topic == "":
		return fmt.Errorf("session %s: --topic is required: the consumed topic of the session", cmd)
	case session != nil && *session == "":
		return fmt.Errorf("session %s: --session is required: the session's key", cmd)
	case rate != nil && *rate < 0:
		return errors.New("session limit: --rate is required: records per second, 0 to remove the session's limit")
	case burst != nil && *burst < 0:
		return fmt.Errorf("session limit: --burst %d: want 0 or more", *burst)
	case *timeout <= 0:
		return fmt.Errorf("session %s: --timeout %v: want a positive duration such as 30s", cmd, *timeout)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return fmt.Errorf("session %s: %w", cmd, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ct := consumer.ControlTarget{Brokers: strings.Split(*brokers, ","), Group: *group, Topic: *ctlTopic, By: *by, ClientOptions: opts}
	var s consumer.ControlledSession
	switch cmd {
	case "list":
		return list(ctx, stdout, ct)
	case "pause":
		s, err = consumer.PauseSession(ctx, ct, *topic, *session, *reason)
	case "resume":
		s, err = consumer.ResumeSession(ctx, ct, *topic, *session)
	case "limit":
		s, err = consumer.LimitSession(ctx, ct, *topic, *session, consumer.Limit{Rate: *rate, Burst: *burst}, *reason)
	}
	if err != nil {
		return fmt.Errorf("session %s: brokers %s: %w", cmd, *brokers, err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", done(cmd), line(s))
	return nil
}

func done(cmd string) string {
	switch cmd {
	case "pause":
		return "paused (every member within Control.Interval)"
	case "resume":
		return "resumed"
	}
	return "limit set"
}

// line is one session's setting as list prints it.
func line(s consumer.ControlledSession) string {
	state := []string{}
	if s.Paused {
		state = append(state, "paused")
	}
	if s.Rate > 0 {
		state = append(state, fmt.Sprintf("limited to %g/s (burst %d)", s.Rate, max(s.Burst, 1)))
	}
	if len(state) == 0 {
		state = append(state, "not controlled")
	}
	return fmt.Sprintf("%s\tsession %q\t%s\tby %q\tsince %s\treason %q", s.Topic, s.Session, strings.Join(state, ", "),
		orDash(s.By), s.At.UTC().Format(time.RFC3339), s.Reason)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func list(ctx context.Context, stdout io.Writer, ct consumer.ControlTarget) error {
	ss, err := consumer.ListControlled(ctx, ct)
	if err != nil {
		return fmt.Errorf("session list: brokers %s: %w", strings.Join(ct.Brokers, ","), err)
	}
	paused := 0
	for _, s := range ss {
		fmt.Fprintln(stdout, line(s))
		if s.Paused {
			paused++
		}
	}
	fmt.Fprintf(stdout, "%s controlled, %d paused (group %s, control topic %s)\n", cli.Count(len(ss), "session"), paused, ct.Group, ct.Topic)
	return nil
}
