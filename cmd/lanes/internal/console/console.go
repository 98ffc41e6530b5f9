// Package console is "lanes console": a web page of one consumer group
// across its members, built from what Kafka holds (docs/observability.md).
package console

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
)

var help = cli.Help{
	Name: "console",
	Args: "--brokers host:port --group GROUP [--addr 127.0.0.1:8080] [--dlq TOPIC] [flags]",
	About: "Serves one page about a lanes consumer group, for the operator who does not know which member to " +
		"look at: its members and their partitions, each partition's committed offset, end and lag and who owns " +
		"it, the sessions parked and held (from the park topics), the sessions paused or limited (from the control " +
		"topic) and the dead letters by reason (--dlq). It is built from what Kafka holds, read again at each " +
		"load, so it needs no member to be up; what only a member knows (running attempts, stalls) is on each " +
		"member's own status page. Read-only unless --actions. Serve it on a private address.",
	Docs: "observability.md#the-group-view",
}

//go:embed console.html
var pageHTML string

var page = template.Must(template.New("console").Funcs(template.FuncMap{}).Parse(pageHTML))

// Run is "lanes console": it serves the group's page until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := help.FlagSet()
	brokers := fs.String("brokers", "", "comma-separated Kafka brokers, `host:port`,... (required)")
	group := fs.String("group", "", "the consumer `GROUP` (required)")
	addr := fs.String("addr", "127.0.0.1:8080", "serve the page on `ADDR`")
	dlqTopic := fs.String("dlq", "", "the group's dead-letter `TOPIC`, to count its records by reason")
	suffix := fs.String("park-suffix", consumer.DefaultParkTopicSuffix, "the park topic `SUFFIX` (Config.Park.TopicSuffix)")
	ctlTopic := fs.String("control-topic", consumer.DefaultControlTopic, "the control `TOPIC` (Config.Control.Topic)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on one page's reads after this long")
	acts := fs.Bool("actions", false, "turn on the page's actions: release a held session, pause or resume a session, replay dead letters (each a POST with the page's token, logged); put the console behind your own authentication")
	var sec cli.Security
	sec.Register(fs)
	if err := cli.Parse(fs, help, args, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("console: %w", err)
	}
	switch {
	case *brokers == "":
		return errors.New("console: --brokers is required: the Kafka brokers, host:port[,host:port]")
	case *group == "":
		return errors.New("console: --group is required: the consumer group to show")
	case *timeout <= 0:
		return fmt.Errorf("console: --timeout %v: want a positive duration such as 30s", *timeout)
	}
	opts, err := sec.ClientOpts(true)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	o := options{brokers: strings.Split(*brokers, ","), group: *group, dlq: *dlqTopic, parkSuffix: *suffix, ctlTopic: *ctlTopic, opts: opts, timeout: *timeout, actions: *acts}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("console: --addr %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "lanes console: group %s on http://%s/ (Ctrl-C to stop)\n", *group, ln.Addr())
	return Serve(ctx, ln, o)
}

// Serve serves the group's page on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, o options) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(o.brokers...)}, o.opts...)...)
	if err != nil {
		return fmt.Errorf("console: brokers %s: %w", strings.Join(o.brokers, ","), err)
	}
	defer cl.Close()
	var a *actions
	if o.actions {
		a = newActions(o)
		defer a.close() // after the server: a replay under way stops, keeping its progress
	}
	srv := &http.Server{Handler: handler(o, cl, a), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }() // owned here: Shutdown ends it, and its error is waited for
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	case err := <-done:
		return fmt.Errorf("console: %w", err)
	}
}

// handler serves the group's page (GET / and GET /group) and, with
// actions on (a), its POSTs.
func handler(o options, cl *kgo.Client, a *actions) http.Handler {
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, r *http.Request) {
		v := gather(r.Context(), o, cl)
		if a != nil {
			v.Actions, v.Token, v.Did, v.Replay, v.Refresh = true, a.token, r.URL.Query().Get("did"), a.replayState(), 30
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		_ = page.Execute(w, v)
	}
	mux.HandleFunc("GET /{$}", serve)
	mux.HandleFunc("GET /group", serve)
	if a != nil {
		mux.Handle("POST /", a.handler())
	} else {
		mux.HandleFunc("POST /", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "actions are off: start lanes console with --actions", http.StatusForbidden)
		})
	}
	return mux
}

// TotalLag is the lag of every partition whose lag is known.
func (v view) TotalLag() int64 {
	var n int64
	for _, p := range v.Partitions {
		n += max(p.Lag, 0)
	}
	return n
}
