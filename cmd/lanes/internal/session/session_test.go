package session

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/lanestest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadArgs: wrong input is refused naming the flag that is wrong.
func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, ""},
		{nil, "want a command: pause, resume, limit or list"},
		{[]string{"stop"}, `unknown command "stop"`},
		{[]string{"pause", "--group", "g", "--topic", "t", "--session", "s"}, "--brokers is required"},
		{[]string{"pause", "--brokers", "127.0.0.1:1", "--topic", "t", "--session", "s"}, "--group is required"},
		{[]string{"resume", "--brokers", "127.0.0.1:1", "--group", "g", "--session", "s"}, "--topic is required"},
		{[]string{"resume", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t"}, "--session is required"},
		{[]string{"limit", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t", "--session", "s"}, "--rate is required"},
		{[]string{"limit", "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t", "--session", "s", "--rate", "1", "--burst", "-1"}, "--burst -1"},
		{[]string{"list", "--brokers", "127.0.0.1:1", "--group", "g", "--session", "s"}, "flag provided but not defined: --session"},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), tc.args, &out, &errOut)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestPauseLimitResumeList: the commands against an embedded broker
// write what list reads back: paused with its reason, then limited too,
// then resumed (the limit stays), and a resume of a session not paused is
// refused.
func TestPauseLimitResumeList(t *testing.T) {
	b, err := lanestest.NewBroker(1, "chats")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), append(args, "--brokers", strings.Join(b.Addrs(), ","), "--group", "chat-service"), &out, &errOut)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return out
	}
	must("pause", "--topic", "chats", "--session", "chat-42", "--reason", "moderation", "--by", "ops")
	must("limit", "--topic", "chats", "--session", "chat-42", "--rate", "2.5", "--burst", "3", "--by", "ops2")
	out := must("list")
	if !strings.Contains(out, `session "chat-42"	paused, limited to 2.5/s (burst 3)	by "ops2"`) || !strings.Contains(out, `reason "moderation"`) || !strings.Contains(out, "1 session controlled, 1 paused (group chat-service") {
		t.Fatalf("list after pause and limit:\n%s", out)
	}
	must("resume", "--topic", "chats", "--session", "chat-42")
	if out := must("list"); !strings.Contains(out, "limited to 2.5/s") || strings.Contains(out, "paused,") || !strings.Contains(out, "0 paused") {
		t.Fatalf("list after resume:\n%s", out)
	}
	if _, err := run("resume", "--topic", "chats", "--session", "chat-42"); err == nil || !strings.Contains(err.Error(), "not paused") {
		t.Fatalf("a second resume: %v; want not paused", err)
	}
	must("limit", "--topic", "chats", "--session", "chat-42", "--rate", "0")
	if out := must("list"); !strings.Contains(out, "0 sessions controlled") {
		t.Fatalf("list after the limit's removal:\n%s", out)
	}
}
