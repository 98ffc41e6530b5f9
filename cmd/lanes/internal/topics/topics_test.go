package topics

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadArgs: wrong input is refused with a message naming the one flag
// (or argument) that is wrong; -h prints the usage and succeeds.
func TestBadArgs(t *testing.T) {
	base := func(cmd string, extra ...string) []string {
		return append([]string{cmd, "--brokers", "127.0.0.1:1", "--group", "g", "--topic", "t"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string // "" = no error
	}{
		{[]string{"-h"}, ""},
		{nil, "want a command: create or check"},
		{[]string{"list"}, `unknown command "list": want create or check`},
		{[]string{"create", "--group", "g", "--topic", "t"}, "--brokers is required"},
		{[]string{"check", "--brokers", "127.0.0.1:1", "--topic", "t"}, "--group is required"},
		{[]string{"create", "--brokers", "127.0.0.1:1", "--group", "g"}, "--topic is required"},
		{base("create", "--topic", "a,,b"), `invalid value "a,,b" for flag --topic: empty topic name`},
		{base("create", "extra"), `unexpected argument "extra"`},
		{base("create", "--park-suffix", ".p"), "--park-suffix needs --park"},
		{base("check", "--park", "--park-suffix", ""), "--park-suffix: empty"},
		{base("create", "--dlq-partitions", "-1", "--dlq", "d"), "--dlq-partitions -1"},
		{base("create", "--dlq-partitions", "3"), "--dlq-partitions needs --dlq"},
		{base("create", "--partitions", "-2"), "--partitions -2"},
		{base("create", "--replication-factor", "0"), "--replication-factor 0"},
		{base("create", "--replication-factor", "-3"), "--replication-factor -3"},
		{base("create", "--timeout", "0s"), "--timeout 0s"},
		{base("check", "--dry-run"), "flag provided but not defined: --dry-run"},
		{base("check", "--partitions", "3"), "flag provided but not defined: --partitions"},
		{base("create", "--sasl-user", "u"), "--sasl-user needs --sasl-mechanism"},
		{base("create", "--park", "--dlq", "d", "--topic", "t.park"), `the park topic "t.park" of "t" is also a consumed topic`},
		{base("create", "--park"), "DeadLetterTopic: required with Park.Enabled"},
		{base("create", "--dlq", "t"), `DeadLetterTopic: "t" is also a consumed topic`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), tc.args, &out, &errOut)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v", err)
			case tc.want == "" && !strings.Contains(out.String(), "Usage: lanes topics <command>"):
				t.Fatalf("usage not printed: %q", out.String())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// runOn runs "lanes topics args..." against b and returns its output.
func runOn(t *testing.T, b *lanestest.Broker, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args[:1:1], append([]string{"--brokers", strings.Join(b.Addrs(), ","), "--group", "g", "--timeout", "30s"}, args[1:]...)...)
	err := Run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// wantLines fails unless out has each line (a prefix of one of its lines).
func wantLines(t *testing.T, what, out string, lines ...string) {
	t.Helper()
	for _, w := range lines {
		found := false
		for _, l := range strings.Split(out, "\n") {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("%s: no line %q in:\n%s", what, w, out)
		}
	}
}

// TestCreateThenCheck: check reports what is missing; create makes the
// park topics with their sources' partition counts and the DLQ, with
// cleanup.policy=delete (read back from the broker); running create again
// and check find everything ok.
func TestCreateThenCheck(t *testing.T) {
	b, err := lanestest.NewBroker(3, "chats")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.CreateTopics(ctx, 2, "orders"); err != nil {
		t.Fatal(err)
	}
	args := []string{"--topic", "chats", "--topic", "orders", "--dlq", "svc-dlq", "--park"}
	out, err := runOn(t, b, append([]string{"check"}, args...)...)
	if err == nil || !strings.Contains(err.Error(), "topics check: 3 of 5 topics missing or wrong") {
		t.Fatalf("check before create: %v\n%s", err, out)
	}
	wantLines(t, "check before create", out,
		"missing      dead-letter topic svc-dlq: missing: create it with 3 partitions and cleanup.policy=delete",
		"missing      park topic orders.park (of orders): missing: create it with 2 partitions, as orders has,")

	out, err = runOn(t, b, append([]string{"create"}, args...)...)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	wantLines(t, "create", out,
		"ok           consumed topic chats: 3 partitions, replication factor 1",
		"ok           consumed topic orders: 2 partitions",
		"created      dead-letter topic svc-dlq: 3 partitions, replication factor 1, cleanup.policy=delete",
		"created      park topic chats.park (of chats): 3 partitions, replication factor 1, cleanup.policy=delete",
		"created      park topic orders.park (of orders): 2 partitions, replication factor 1, cleanup.policy=delete",
		"5 topics: 2 ok, 3 created")

	cl, err := b.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, "svc-dlq", "chats.park", "orders.park")
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "svc-dlq", "chats.park", "orders.park")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"svc-dlq": 3, "chats.park": 3, "orders.park": 2} {
		if got := len(tds[name].Partitions); got != want {
			t.Errorf("%s has %d partitions on the broker, want %d", name, got, want)
		}
		rc, err := rcs.On(name, nil)
		policy := ""
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				policy = *c.Value
			}
		}
		if err != nil || policy != "delete" {
			t.Errorf("%s: cleanup.policy set to %q (%v), want delete", name, policy, err)
		}
	}

	for _, cmd := range []string{"create", "check"} {
		out, err = runOn(t, b, append([]string{cmd}, args...)...)
		if err != nil || !strings.Contains(out, "5 topics: 5 ok\n") {
			t.Fatalf("%s again: %v\n%s", cmd, err, out)
		}
	}
}

// TestWrongMissingAndDryRun: a park topic with another partition count
// than its source and a missing consumed topic fail the command, each
// named with what to do; --dry-run creates nothing; --partitions creates a
// consumed topic; a replication factor the broker cannot meet is reported.
func TestWrongMissingAndDryRun(t *testing.T) {
	b, err := lanestest.NewBroker(3, "chats")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopics(context.Background(), 1, "chats.park"); err != nil {
		t.Fatal(err)
	}
	out, err := runOn(t, b, "create", "--topic", "chats,nosuch", "--park", "--dlq", "dlq")
	if err == nil || !strings.Contains(err.Error(), "topics create: 3 of 5 topics missing or wrong (see above)") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	wantLines(t, "create", out,
		"wrong        park topic chats.park (of chats): has 1 partition, chats has 3: they must be equal",
		"missing      consumed topic nosuch: missing: create it first",
		"missing      park topic nosuch.park (of nosuch): missing: it needs the partition count of nosuch",
		"created      dead-letter topic dlq: 3 partitions",
		"5 topics: 1 ok, 1 created, 2 missing, 1 wrong")
	if !strings.Contains(out, "kafka-topics.sh --alter --topic chats.park --partitions 3") {
		t.Errorf("no fix for chats.park in:\n%s", out)
	}

	out, err = runOn(t, b, "create", "--topic", "nosuch", "--dlq", "dlq", "--park", "--park-suffix", ".held", "--partitions", "4", "--dry-run",
		"--dlq", "dlq2")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	wantLines(t, "dry run", out, "would create consumed topic nosuch: 4 partitions", "would create dead-letter topic dlq2: 4 partitions",
		"would create park topic nosuch.held (of nosuch): 4 partitions", "3 topics: 3 would create")
	out, err = runOn(t, b, "check", "--topic", "nosuch")
	if err == nil || !strings.Contains(out, "missing      consumed topic nosuch") {
		t.Fatalf("the dry run created nosuch: %v\n%s", err, out)
	}

	out, err = runOn(t, b, "create", "--topic", "nosuch", "--park", "--dlq", "dlq", "--partitions", "4", "--replication-factor", "3")
	if err == nil || !strings.Contains(out, "missing      consumed topic nosuch: missing, and the brokers refused to create it with 4 partitions and replication factor 3") {
		t.Fatalf("replication factor 3 on one broker: %v\n%s", err, out)
	}
	out, err = runOn(t, b, "create", "--topic", "nosuch", "--park", "--dlq", "dlq", "--partitions", "4", "--replication-factor", "1")
	if err != nil {
		t.Fatalf("create --partitions 4: %v\n%s", err, out)
	}
	wantLines(t, "create --partitions 4", out, "created      consumed topic nosuch: 4 partitions, replication factor 1",
		"created      park topic nosuch.park (of nosuch): 4 partitions, replication factor 1, cleanup.policy=delete")
}
