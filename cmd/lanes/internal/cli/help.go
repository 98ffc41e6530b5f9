package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// DocsURL is where the documents a help text names are: an installed
// binary carries none of them, so help links them in full.
const DocsURL = "https://github.com/lanesdev/lanes/blob/main/docs/"

// width is the column help text is wrapped at.
const width = 80

// Help is a command's help. "lanes -h", "lanes-lab -h" and every
// "<prog> <command> -h" print theirs in one format (Print):
//
//	Usage: <prog> <name> <args>
//
//	<about: one paragraph, wrapped>
//
//	Commands:                 (a command with subcommands)
//	  <name>   <what it does>
//
//	Flags:
//	  --<flag> <VALUE>
//	      <what it sets> (default <value>)
//
//	TLS and SASL flags:       (a command that talks to a real cluster)
//	  --tls
//	      ...
//
//	Docs: https://github.com/lanesdev/lanes/blob/main/docs/<docs>
//
// Flags are written with two dashes, as the docs write them (the flag
// package takes one or two).
type Help struct {
	Prog     string    // the program: "lanes-lab"; "" for lanes
	Name     string    // the command after the program's name: "dlq inspect"; "" for the program itself
	Args     string    // what follows the name in the usage line: "--brokers host:port --topic DLQ [flags]"
	About    string    // what the command does: one paragraph, wrapped when printed
	Commands []Command // the subcommands of a command that has them
	Docs     string    // a file under docs/, with an optional #anchor: "parking.md#inspecting"
}

// Command is one subcommand a Help lists.
type Command struct{ Name, About string }

// Program is the name of the program h is a command of: Prog, or "lanes".
func (h Help) Program() string {
	if h.Prog == "" {
		return "lanes"
	}
	return h.Prog
}

// FlagSet returns an empty flag set for the command, named h.Name.
func (h Help) FlagSet() *flag.FlagSet { return flag.NewFlagSet(h.Name, flag.ContinueOnError) }

// Print writes h to w, with the flags of fs (nil for none).
func (h Help) Print(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n", strings.Join(nonEmpty(h.Program(), h.Name, h.Args), " "))
	fmt.Fprintln(w, wrap(h.About, "", width))
	if len(h.Commands) > 0 {
		fmt.Fprint(w, "\nCommands:\n")
		n := 0
		for _, c := range h.Commands {
			n = max(n, len(c.Name))
		}
		for _, c := range h.Commands {
			fmt.Fprintf(w, "  %-*s  %s\n", n, c.Name, c.About)
		}
		fmt.Fprintf(w, "\nRun %q for a command's flags.\n", strings.Join(nonEmpty(h.Program(), h.Name, "<command> -h"), " "))
	}
	if fs != nil {
		var general, security []*flag.Flag
		fs.VisitAll(func(f *flag.Flag) {
			if IsSecurityFlag(f.Name) {
				security = append(security, f)
			} else {
				general = append(general, f)
			}
		})
		printFlags(w, "Flags", general)
		printFlags(w, "TLS and SASL flags", security)
	}
	if h.Docs != "" {
		fmt.Fprintf(w, "\nDocs: %s%s\n", DocsURL, h.Docs)
	}
}

// printFlags lists flags under title, each as the docs write it (--name
// VALUE) with its description below.
func printFlags(w io.Writer, title string, flags []*flag.Flag) {
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, f := range flags {
		fmt.Fprintf(w, "  %s\n", FlagSyntax(f))
		_, usage := flag.UnquoteUsage(f)
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
			usage += " (default " + d + ")"
		}
		fmt.Fprintln(w, wrap(usage, "      ", width))
	}
}

// FlagSyntax is how help writes f: --name, then what it takes unless it is
// a switch. A word in backquotes in the flag's usage names the value
// (`TOPIC`); otherwise its type does: N, NUMBER, DURATION or VALUE.
func FlagSyntax(f *flag.Flag) string {
	name, _ := flag.UnquoteUsage(f)
	switch name {
	case "":
		return "--" + f.Name
	case "int", "uint", "int64", "uint64":
		name = "N"
	case "float":
		name = "NUMBER"
	case "duration":
		name = "DURATION"
	case "string", "value":
		name = "VALUE"
	}
	return "--" + f.Name + " " + name
}

// Parse parses args into fs, the flags of the command h describes. -h or
// --help prints h to stdout and returns flag.ErrHelp. A flag that is not
// the command's, or a bad value, is an error that names the flag as the
// docs write it (--name) and says how to list the flags; so is an
// argument that is no flag: every command takes only flags.
func Parse(fs *flag.FlagSet, h Help, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard) // the flag package's own messages and usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		h.Print(stdout, fs)
		return err
	case err != nil:
		return fmt.Errorf("%s (%s lists the flags)", twoDashes(err.Error()), strings.Join(nonEmpty(h.Program(), h.Name, "-h"), " "))
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: %s takes only flags", fs.Arg(0), strings.Join(nonEmpty(h.Program(), h.Name), " "))
	}
	return nil
}

// oneDash matches the flag package's errors where they name a flag with
// one dash.
var oneDash = regexp.MustCompile(`^(flag provided but not defined: |flag needs an argument: |invalid (?:boolean )?value ".*" for (?:flag )?)-`)

// twoDashes writes the flag an error of the flag package names as the
// docs do: "flag provided but not defined: --reason".
func twoDashes(msg string) string { return oneDash.ReplaceAllString(msg, "${1}--") }

// IsSecurityFlag reports whether name is one of the TLS and SASL flags
// (Security.Register), which help lists apart.
func IsSecurityFlag(name string) bool {
	return name == "tls" || strings.HasPrefix(name, "tls-") || strings.HasPrefix(name, "sasl-")
}

// wrap fills text's words into lines of at most width columns, each
// starting with indent (a longer word has a line of its own).
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := 0
	for _, word := range strings.Fields(text) {
		switch {
		case line == 0:
			b.WriteString(indent)
			line = len(indent)
		case line+1+len(word) > width:
			b.WriteString("\n" + indent)
			line = len(indent)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

func nonEmpty(parts ...string) []string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Count is n and noun, in the plural unless n is 1: "1 record",
// "2 records", "0 retries". Every count the commands print goes through
// it.
func Count[N ~int | ~int32 | ~int64 | ~uint64](n N, noun string) string {
	return fmt.Sprintf("%d %s", n, Plural(n, noun))
}

// Plural is noun as it reads after n: "record" for 1, "records" for 0 or
// 2; "retry" becomes "retries", "batch" "batches".
func Plural[N ~int | ~int32 | ~int64 | ~uint64](n N, noun string) string {
	if n == 1 || noun == "" {
		return noun
	}
	if strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])) {
		return noun[:len(noun)-1] + "ies"
	}
	for _, s := range []string{"s", "x", "z", "ch", "sh"} {
		if strings.HasSuffix(noun, s) {
			return noun + "es"
		}
	}
	return noun + "s"
}
