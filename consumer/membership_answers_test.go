package consumer

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHeartbeatsTakenOnTheWire: a member's heartbeats, read on its own
// dialer's connections (a kgo.Dialer in ClientOptions), are seen taken:
// the silence counts from the latest one sent. Without the answers read
// on the wire, the silence would count from the assignment and every
// member would hold its work once four fifths of the session timeout
// passed.
func TestHeartbeatsTakenOnTheWire(t *testing.T) {
	for _, proto := range protocolsFor(t, "kip848") {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnv(t, 2)
			var dials atomic.Int64
			dial := func(ctx context.Context, network, host string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, host)
			}
			cfg := e.groupConfig("g-wire-"+proto.name, append(proto.opts, kgo.Dialer(dial)))
			rec := newRecorder(1<<30, nil)
			c, err := New(cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			e.produceValues("chats", "a|0")
			eventually(t, "the record handled", func() bool { return len(rec.snapshot()) > 0 })
			handled := time.Now()
			eventually(t, "a heartbeat sent after the record was handled taken", func() bool {
				c.member.mu.Lock()
				defer c.member.mu.Unlock()
				return c.member.sentAt.After(handled)
			})
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if dials.Load() == 0 {
				t.Fatal("the kgo.Dialer of ClientOptions was not used")
			}
			if n := c.Stats().SilenceHolds; n != 0 {
				t.Fatalf("%d silence holds while the coordinator took every heartbeat", n)
			}
		})
	}
}

// TestAnswerOptsKeepTLS: a DialTLSConfig in ClientOptions still dials
// TLS once the dial function is wrapped (its first byte is a TLS
// handshake record), and a group-only option in ClientOptions does not
// make the dial function unreadable.
func TestAnswerOptsKeepTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	first := make(chan byte, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		b := make([]byte, 1)
		if _, err := conn.Read(b); err == nil {
			first <- b[0]
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nop := zerolog.Nop()
	c := &Consumer{cfg: Config{Brokers: []string{ln.Addr().String()}, Group: "g", ClientOptions: []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true}), // the listener is not a broker: nothing is verified
		kgo.AutoCommitCallback(func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error) {}),
	}, Logger: &nop, FetchMaxWait: DefaultFetchMaxWait}, member: newMembership("g", &nop), clientCtx: ctx}
	wire, err := c.answerOpts()
	if err != nil {
		t.Fatalf("answerOpts: %v", err)
	}
	c.wire = wire
	cl, err := kgo.NewClient(c.groupOpts()...)
	if err != nil {
		t.Fatalf("the group client with the wrapped dial: %v", err)
	}
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, testTimeout)
	defer pcancel()
	go func() { _ = cl.Ping(pctx) }()
	select {
	case b := <-first:
		if b != 0x16 {
			t.Fatalf("first byte dialed 0x%x, want 0x16 (a TLS handshake)", b)
		}
	case <-time.After(testTimeout):
		t.Fatal("the group client never dialed")
	}
}
