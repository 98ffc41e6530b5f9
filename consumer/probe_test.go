package consumer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freeAddr returns a local host:port where nothing listens (a port the
// kernel just handed out and that was closed again).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// portOf returns the port of a host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// logCapture is a zerolog logger whose JSON lines the test reads back.
type logCapture struct {
	buf syncBuffer
	log zerolog.Logger
}

func newLogCapture() *logCapture {
	lc := &logCapture{}
	lc.log = zerolog.New(&lc.buf).Level(zerolog.DebugLevel)
	return lc
}

// slog returns a log/slog logger writing into the same buffer, its lines
// shaped as the zerolog logger's (message, lower-case level).
func (lc *logCapture) slog() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&lc.buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.MessageKey:
				a.Key = "message"
			case slog.LevelKey:
				a.Value = slog.StringValue(strings.ToLower(a.Value.String()))
			}
			return a
		},
	}))
}

// lines returns the lines whose message contains msg, decoded.
func (lc *logCapture) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range bytes.Split(lc.buf.Bytes(), []byte("\n")) {
		var m map[string]any
		if len(l) == 0 || json.Unmarshal(l, &m) != nil {
			continue
		}
		if s, _ := m["message"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

// where returns the lines for which keep holds.
func (lc *logCapture) where(keep func(map[string]any) bool) []map[string]any {
	var out []map[string]any
	for _, m := range lc.lines("") {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func (lc *logCapture) String() string { return string(lc.buf.Bytes()) }

// probe reads readyz from a consumer's HealthHandler, as Kubernetes does.
type probe struct {
	t   *testing.T
	srv *httptest.Server
}

func newProbe(t *testing.T, c *Consumer) *probe {
	srv := httptest.NewServer(c.HealthHandler())
	t.Cleanup(srv.Close)
	return &probe{t: t, srv: srv}
}

func (p *probe) readyz() (int, string) {
	p.t.Helper()
	return get(p.t, p.srv, "/readyz")
}

// awaitReadyz polls readyz until cond holds for its status and body, for at
// most within; it returns the last body.
func (p *probe) awaitReadyz(what string, within time.Duration, cond func(code int, body string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := p.readyz()
		if cond(code, body) {
			return body
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("readyz after %v: want %s, got %d %q", within, what, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notReadyWith waits for a 503 whose body contains every part.
func notReadyWith(parts ...string) func(int, string) bool {
	return func(code int, body string) bool {
		if code != http.StatusServiceUnavailable {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(body, p) {
				return false
			}
		}
		return true
	}
}

// dialCounter counts failed and successful broker dials of a client.
type dialCounter struct{ failed, ok *atomic.Int64 }

func newDialCounter() dialCounter { return dialCounter{new(atomic.Int64), new(atomic.Int64)} }

func (d dialCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		d.failed.Add(1)
	} else {
		d.ok.Add(1)
	}
}
