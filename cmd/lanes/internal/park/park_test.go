package park

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/lanestest"
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
