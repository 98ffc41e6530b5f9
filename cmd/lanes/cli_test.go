package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli/clitest"
)

// TestHelp: -h on every command and subcommand prints its usage and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"help"}, {"broker", "-h"}, {"dlq", "-h"},
		{"dlq", "inspect", "-h"}, {"dlq", "replay", "--help"}, {"park", "-h"}, {"park", "inspect", "-h"},
		{"topics", "-h"}, {"topics", "create", "-h"}, {"topics", "check", "--help"}, {"version", "-h"},
	} {
		clitest.PrintsUsage(t, lanes, args)
	}
}

// TestSubcommandFlags: dlq inspect and dlq replay each list their own
// flags, and only theirs.
func TestSubcommandFlags(t *testing.T) {
	for _, tc := range []struct {
		cmd       string
		want, not []string
	}{
		{"inspect", []string{"--limit", "--values", "--timeout", "--brokers", "--topic"}, []string{"--reason", "--dry-run", "--to "}},
		{"replay", []string{"--reason", "--dry-run", "--to", "--timeout", "--brokers"}, []string{"--limit", "--values"}},
	} {
		var out bytes.Buffer
		_ = run(context.Background(), []string{"dlq", tc.cmd, "-h"}, &out, &out)
		for _, f := range tc.want {
			if !strings.Contains(out.String(), "  "+f) {
				t.Errorf("dlq %s -h lacks %s:\n%s", tc.cmd, f, out.String())
			}
		}
		for _, f := range tc.not {
			if strings.Contains(out.String(), "  "+f) {
				t.Errorf("dlq %s -h lists %s, a flag of the other command", tc.cmd, f)
			}
		}
	}
}

// TestVersion: lanes version and --version print the module version and
// the Go version; an extra argument is an error.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "lanes ") || !strings.Contains(out.String(), "go1.") {
			t.Errorf("%v printed %q, want the lanes version and the Go version", args, out.String())
		}
	}
	if err := run(context.Background(), []string{"version", "extra"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("version with an extra argument succeeded")
	}
}

// TestBadArgs: wrong input is rejected, never accepted silently, and the
// message names the one flag (or argument) that is wrong.
func TestBadArgs(t *testing.T) {
	dlq := func(cmd string, extra ...string) []string {
		return append([]string{"dlq", cmd, "--brokers", "127.0.0.1:1", "--topic", "chat-dlq"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no command given"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"demo"}, `unknown command "demo": it is lanes-lab demo now (go install github.com/lanesdev/lanes/cmd/lanes/lanes-lab@`},
		{[]string{"bench", "--rounds", "3"}, `unknown command "bench": it is lanes-lab bench now`},
		{[]string{"broker", "--port", "70000"}, "--port 70000"},
		{[]string{"broker", "--partitions", "0"}, "--partitions 0"},
		{[]string{"broker", "--topics", "a,,b"}, "--topics"},
		{[]string{"broker", "chat"}, `unexpected argument "chat"`},
		{[]string{"dlq"}, "want a command: inspect or replay"},
		{[]string{"dlq", "list"}, `unknown command "list"`},
		{[]string{"dlq", "inspect", "--topic", "x"}, "--brokers is required"},
		{[]string{"dlq", "replay", "--brokers", "127.0.0.1:1"}, "--topic is required"},
		{dlq("inspect", "--limit", "-1"), "--limit -1"},
		{dlq("inspect", "--timeout", "0s"), "--timeout 0s"},
		{dlq("inspect", "extra"), `unexpected argument "extra"`},
		{dlq("inspect", "--reason", "permanent"), "flag provided but not defined: --reason"},
		{dlq("replay", "--limit", "3"), "flag provided but not defined: --limit"},
		{dlq("replay", "--reason", "permament"), `--reason "permament": want one of permanent, decode, retries-exhausted, timeout, stalled, park-exhausted, park-lost`},
		{dlq("replay", "--sasl-user", "u"), "--sasl-user needs --sasl-mechanism"},
		{[]string{"version", "x"}, `unexpected argument "x"`},
	} {
		clitest.Refuses(t, lanes, tc.args, tc.want)
	}
}

// TestBrokerPrintsTopics: lanes broker says which topics it created.
func TestBrokerPrintsTopics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // start, print, stop
	var out bytes.Buffer
	if err := run(ctx, []string{"broker", "--port", "0", "--topics", "chat,chat-dlq", "--partitions", "3"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listening on 127.0.0.1:", "created topic chat (3 partitions)", "created topic chat-dlq (3 partitions)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
