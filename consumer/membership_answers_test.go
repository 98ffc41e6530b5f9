package consumer

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/groupwire"
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
// make the dial function unreadable. The failed dial reaches the broker
// watch hooked by groupOpts (this test's Consumer once lacked it, and a
// dial failing before Close crashed the package's tests on a nil watch).
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
	}, Logger: &nop, FetchMaxWait: DefaultFetchMaxWait}, member: newMembership("g", &nop), clientCtx: ctx,
		reach: newBrokerWatch([]string{ln.Addr().String()}, &nop)} // groupOpts hooks it
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
	pinged := make(chan struct{})
	go func() { // owned here: ended and waited for below
		defer close(pinged)
		_ = cl.Ping(pctx)
	}()
	defer func() { pcancel(); <-pinged }()
	select {
	case b := <-first:
		if b != 0x16 {
			t.Fatalf("first byte dialed 0x%x, want 0x16 (a TLS handshake)", b)
		}
	case <-time.After(testTimeout):
		t.Fatal("the group client never dialed")
	}
	// The listener hangs up: the handshake fails, and the client's hooks
	// (the broker watch among them) see the failed dial before Close.
	waitFor(t, "the failed dial seen by the broker watch", c.reach.down.Load, func() string { return c.reach.reason() })
}

// TestHoldReasonOnceHeartbeatsTaken: readiness names a silence hold truly
// on both sides of the first heartbeat taken again. Before it, no
// heartbeat is taken; after it the hold lasts (it ends at the second taken
// in a session: the first may answer one sent before the hold), and
// readiness says heartbeats are taken again, not that none is.
func TestHoldReasonOnceHeartbeatsTaken(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	m := clockedMembership(&clock, 10*time.Second)
	m.assigned(func(context.Context, *kgo.Client, map[string][]int32) {})(context.Background(), nil, map[string][]int32{"t": {0}})
	clock = clock.Add(9 * time.Second) // past four fifths of the session timeout, within it
	m.checkSilence(clock, func() {})
	if m.gate() == nil {
		t.Fatal("no hold 9 s into a 10 s session with no heartbeat taken")
	}
	if r := m.reason(clock); !strings.Contains(r, `group "g": no heartbeat taken since`) {
		t.Fatalf("reason in a hold, none taken: %q; want it to say no heartbeat is taken", r)
	}
	take := func() {
		m.onAnswer(groupwire.Answer{Key: int16(kmsg.ConsumerGroupHeartbeat), Sent: clock.Add(-10 * time.Millisecond)})
	}
	clock = clock.Add(500 * time.Millisecond)
	take()
	if m.gate() == nil {
		t.Fatal("the hold ended at the first heartbeat taken; it ends at the second")
	}
	r := m.reason(clock)
	if strings.Contains(r, "no heartbeat taken since") || !strings.Contains(r, "the coordinator takes them again") {
		t.Fatalf("reason in a hold after a heartbeat was taken: %q; want it to say they are taken again", r)
	}
	clock = clock.Add(500 * time.Millisecond)
	take()
	if m.gate() != nil || m.reason(clock) != "" {
		t.Fatalf("after a second heartbeat taken: hold %v, reason %q; want the hold over and no reason", m.gate() != nil, m.reason(clock))
	}
}
