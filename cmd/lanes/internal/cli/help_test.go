package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// TestCount: counts read right in the singular and the plural, for every
// noun the commands count.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "record", "0 records"},
		{1, "record", "1 record"},
		{2, "record", "2 records"},
		{1, "retry", "1 retry"},
		{3, "retry", "3 retries"},
		{2, "day", "2 days"},
		{2, "batch", "2 batches"},
		{2, "bus", "2 buses"},
		{1, "partition", "1 partition"},
		{12, "partition", "12 partitions"},
		{-1, "message", "-1 messages"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
	if got := Count(int64(1), "message"); got != "1 message" {
		t.Errorf("Count(int64(1)) = %q", got)
	}
	if got := Plural(int32(2), "topic"); got != "topics" {
		t.Errorf("Plural(int32(2), topic) = %q", got)
	}
}

// TestHelpFormat: the usage line, the paragraph, the flags with two
// dashes and their values, the security flags apart, the full docs link.
func TestHelpFormat(t *testing.T) {
	h := Help{Name: "thing do", Args: "--name NAME [flags]", About: strings.Repeat("word ", 40), Docs: "x.md#y"}
	fs := h.FlagSet()
	fs.String("name", "", "the `NAME` (required)")
	fs.Int("count", 3, "how many")
	fs.Duration("wait", time.Second, "how long")
	fs.Float64("share", 0, "a share")
	fs.Bool("dry-run", false, "do nothing")
	fs.String("label", "", "a label")
	var sec Security
	sec.Register(fs)
	var out bytes.Buffer
	h.Print(&out, fs)
	got := out.String()
	for _, want := range []string{
		"Usage: lanes thing do --name NAME [flags]\n\nword word",
		"\nFlags:\n  --count N\n      how many (default 3)\n  --dry-run\n      do nothing\n  --label VALUE\n      a label\n" +
			"  --name NAME\n      the NAME (required)\n  --share NUMBER\n      a share\n  --wait DURATION\n      how long (default 1s)\n",
		"\nTLS and SASL flags:\n  --sasl-mechanism MECHANISM\n",
		"\nDocs: https://github.com/lanesdev/lanes/blob/main/docs/x.md#y\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("help lacks %q:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if len(line) > width && !strings.HasPrefix(line, "Usage: ") && !strings.HasPrefix(line, "Docs: ") {
			t.Errorf("line longer than %d: %q", width, line)
		}
	}
	if strings.Contains(got, "\n  --tls") && strings.Index(got, "--tls") < strings.Index(got, "TLS and SASL flags") {
		t.Errorf("a security flag listed with the command's own:\n%s", got)
	}
}

// TestParse: -h prints the help to stdout; errors name the flag with two
// dashes and say where the flags are listed; arguments are refused.
func TestParse(t *testing.T) {
	h := Help{Name: "thing", About: "Does a thing."}
	newFS := func() *flag.FlagSet {
		fs := h.FlagSet()
		fs.Int("limit", 0, "at most N")
		fs.Bool("all", false, "every one")
		return fs
	}
	var out bytes.Buffer
	if err := Parse(newFS(), h, []string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "Usage: lanes thing") {
		t.Fatalf("--help: %v, printed %q", err, out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "flag provided but not defined: --nope (lanes thing -h lists the flags)"},
		{[]string{"-nope"}, "flag provided but not defined: --nope"},
		{[]string{"--limit"}, "flag needs an argument: --limit"},
		{[]string{"--limit", "x"}, `invalid value "x" for flag --limit: parse error`},
		{[]string{"--limit", "-1x"}, `invalid value "-1x" for flag --limit`},
		{[]string{"--all=maybe"}, `invalid boolean value "maybe" for --all`},
		{[]string{"extra"}, `unexpected argument "extra": lanes thing takes only flags`},
		{[]string{"--all", "extra"}, `unexpected argument "extra"`},
	} {
		out.Reset()
		err := Parse(newFS(), h, tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("Parse(%q) printed %q; only -h prints", tc.args, out.String())
		}
	}
	if err := Parse(newFS(), h, []string{"--limit", "3", "-all"}, &out); err != nil {
		t.Fatal(err)
	}
}
