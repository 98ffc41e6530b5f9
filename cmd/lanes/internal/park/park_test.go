package park

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadArgs: wrong input is refused with a message naming the one flag
// (or argument) that is wrong; -h prints the usage and succeeds.
func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" = no error
	}{
		{[]string{"-h"}, ""},
		{nil, "want a command: inspect or release"},
		{[]string{"list"}, `unknown command "list": want inspect or release`},
		{[]string{"inspect", "--group", "g", "--topic", "t"}, "--brokers is required"},
		{[]string{"inspect", "--brokers", "127.0.0.1:1", "--topic", "t"}, "--group is required"},
		{[]string{"inspect", "--brokers", "127.0.0.1:1", "--group", "g", "--session", "s"}, "flag provided but not defined: --session"},
		{[]string{"release", "--brokers", "127.0.0.1:1", "--group", "g", "--session", "s"}, "--topic is required"},
		{[]string{"release", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t"}, "--session is required"},
		{[]string{"release", "--group", "g", "--topic", "t", "--session", "s"}, "--brokers is required"},
		{[]string{"inspect", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"inspect", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), tc.args, &out, &errOut)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want == "" && !strings.Contains(out.String(), "Usage: lanes park <command>"):
			t.Errorf("%q: usage not printed: %q", tc.args, out.String())
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestInspectNothingParked: a topic whose park topic is empty lists no
// session.
func TestInspectNothingParked(t *testing.T) {
	b, err := lanestest.NewBroker(2, "chats", "chats.park")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out, errOut bytes.Buffer
	err = Run(context.Background(), []string{"inspect", "--brokers", strings.Join(b.Addrs(), ","), "--group", "g", "--topic", "chats",
		"--timeout", "30s"}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "0 sessions parked, 0 records") {
		t.Fatalf("inspect: %v\n%s%s", err, out.String(), errOut.String())
	}
}

// TestReleaseCommand: the release command inspect prints for a held
// session, pasted into a shell, gives lanes the brokers, group, topic,
// session and (when not the default) suffix it was printed for, whatever
// their characters; the connection flags inspect was given but the
// secrets, which come from the environment, go with them. A keyless lane
// cannot be named on a command line: the line says how to release it.
func TestReleaseCommand(t *testing.T) {
	for _, tc := range []struct {
		group, suffix, session string
		extra                  []string // connection flags given to inspect
		want                   []string // the pasted command's words after "lanes park release"
	}{
		{"chat-service", consumer.DefaultParkTopicSuffix, "alice", nil,
			[]string{"--brokers", "b1:9092,b2:9092", "--group", "chat-service", "--topic", "chat", "--session", "alice"}},
		{"chat service", ".park-chat service", `it's "$HOME" a\b;` + "`x`", nil,
			[]string{"--brokers", "b1:9092,b2:9092", "--group", "chat service", "--topic", "chat", "--session", `it's "$HOME" a\b;` + "`x`",
				"--suffix", ".park-chat service"}},
		{"g", ".park-g", "bob", []string{"--tls", "--tls-ca", "/etc/ca dir/ca.pem", "--sasl-mechanism", "PLAIN", "--sasl-user", "ops", "--sasl-password", "secret"},
			[]string{"--brokers", "b1:9092,b2:9092", "--group", "g", "--topic", "chat", "--session", "bob", "--suffix", ".park-g",
				"--sasl-mechanism", "PLAIN", "--sasl-user", "ops", "--tls", "--tls-ca", "/etc/ca dir/ca.pem"}},
	} {
		fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
		var sec cli.Security
		sec.Register(fs)
		if err := fs.Parse(tc.extra); err != nil {
			t.Fatal(err)
		}
		rc := releaseCommand("b1:9092,b2:9092", tc.group, tc.suffix, fs)
		l := line(consumer.ParkedSession{Topic: "chat", Session: tc.session, Held: true, HeldThrough: 4, Offsets: []int64{5}}, rc, false)
		_, cmd, ok := strings.Cut(l, "release: ")
		if !ok {
			t.Fatalf("%q: no release command", l)
		}
		cmd, _, _ = strings.Cut(cmd, ")\t")
		if strings.Contains(cmd, "secret") {
			t.Errorf("%q: the SASL password printed", cmd)
		}
		out, err := exec.Command("sh", "-c", `printf '%s\0' `+cmd).Output()
		if err != nil {
			t.Fatalf("sh splitting %q: %v", cmd, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if want := append([]string{"lanes", "park", "release"}, tc.want...); !slices.Equal(got, want) {
			t.Errorf("%q\nsplits into %q\nwant        %q", cmd, got, want)
		}
	}
	l := line(consumer.ParkedSession{Topic: "chat", Session: "\x00chat/0", Held: true, HeldThrough: 4, Offsets: []int64{5}},
		releaseCommand("b:9092", "g", ".park", flag.NewFlagSet("inspect", flag.ContinueOnError)), false)
	if want := "release: with consumer.ReleaseHeld from Go (a session name with a NUL byte, such as a keyless lane's, cannot be passed on a command line)"; !strings.Contains(l, want) {
		t.Errorf("keyless lane: %q\nwant it to contain %q", l, want)
	}
	// A key with control characters (a terminal escape, a carriage return
	// that would hide what is pasted) is never printed raw.
	for _, s := range []string{"a\x1b]0;pwned\x07b", "ok\rlanes park release --group other", "two\nlines", "bad\xffutf8"} {
		l := line(consumer.ParkedSession{Topic: "chat", Session: s, Held: true, HeldThrough: 4, Offsets: []int64{5}},
			releaseCommand("b:9092", "g", ".park", flag.NewFlagSet("inspect", flag.ContinueOnError)), false)
		if strings.ContainsAny(l, "\x1b\r\n\x07") || strings.Contains(l, "\xff") || !strings.Contains(l, "release: with consumer.ReleaseHeld from Go") {
			t.Errorf("session %q printed as %q: want it quoted and the Go way to release it", s, l)
		}
	}
	// A password given as a flag is not printed; the command says where it reads it.
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	var sec cli.Security
	sec.Register(fs)
	if err := fs.Parse([]string{"--sasl-mechanism", "PLAIN", "--sasl-user", "ops", "--sasl-password", "secret"}); err != nil {
		t.Fatal(err)
	}
	l = line(consumer.ParkedSession{Topic: "chat", Session: "bob", Held: true, HeldThrough: 4, Offsets: []int64{5}}, releaseCommand("b:9092", "g", ".park", fs), false)
	if strings.Contains(l, "secret") || !strings.Contains(l, " # set $LANES_SASL_PASSWORD first)") {
		t.Errorf("with --sasl-password: %q; want no password and a note to set $LANES_SASL_PASSWORD", l)
	}
}

// TestInspectAllTopicsSkipsUnparked: inspect without --topic goes through
// every topic the group has commits for; one with no park topic (parking
// not used for it) is skipped and named, not an error.
func TestInspectAllTopicsSkipsUnparked(t *testing.T) {
	b, err := lanestest.NewBroker(1, "chats", "chats.park", "orders", "audit")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var offs kadm.Offsets
	for _, topic := range []string{"chats", "orders", "audit"} {
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	}
	if err := kadm.NewClient(cl).CommitAllOffsets(context.Background(), "g", offs); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(b.Addrs(), ",")
	var out, errOut bytes.Buffer
	if err := Run(context.Background(), []string{"inspect", "--brokers", brokers, "--group", "g", "--timeout", "30s"}, &out, &errOut); err != nil {
		t.Fatalf("inspect: %v\n%s%s", err, out.String(), errOut.String())
	}
	want := "topic audit: no park topic audit.park (parking not used for it; or its park suffix is not .park: name it with --suffix)\n" +
		"topic orders: no park topic orders.park (parking not used for it; or its park suffix is not .park: name it with --suffix)\n" +
		"0 sessions parked, 0 records (group g, topic chats; 2 topics without a park topic: audit, orders)\n"
	if out.String() != want {
		t.Errorf("inspect printed:\n%s\nwant:\n%s", out.String(), want)
	}

	// A wrong suffix skips every topic: an error, not "0 sessions parked".
	out.Reset()
	err = Run(context.Background(), []string{"inspect", "--brokers", brokers, "--group", "g", "--suffix", ".parked", "--timeout", "30s"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "none of its topics has a park topic of suffix .parked") {
		t.Errorf("inspect --suffix .parked: %v\n%s; want an error naming the suffix", err, out.String())
	}

	// Named with --topic, a missing park topic is an error that says so.
	err = Run(context.Background(), []string{"inspect", "--brokers", brokers, "--group", "g", "--topic", "orders", "--timeout", "30s"}, &out, &errOut)
	if !errors.Is(err, consumer.ErrTopicMissing) || !strings.Contains(err.Error(), "orders.park") {
		t.Errorf("inspect --topic orders: %v; want ErrTopicMissing naming orders.park", err)
	}
}
