package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/eventid"
)

// TestSendCtxEndsReportsEventID: when Send's ctx ends before the broker
// acknowledges (the broker holds the produce request), Send returns ctx's
// error with the message's event ID, and the message, delivered later,
// carries that ID: the caller can resend it under the same ID. Before the
// fix the Result was empty.
func TestSendCtxEndsReportsEventID(t *testing.T) {
	c := cluster(t, 1, "t")
	hold := make(chan struct{})
	var once sync.Once
	var asleep sync.WaitGroup
	t.Cleanup(func() { once.Do(func() { close(hold) }); asleep.Wait() }) // before the cluster closes (kfake: consumer/kfake_sleep_test.go)
	held := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		asleep.Add(1)
		defer asleep.Done()
		select {
		case held <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-hold })
		return nil, nil, false
	})
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "t"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }() // the request is at the broker: ctx ends first
	res, err := p.Send(ctx, "s", []byte("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send: %v; want ctx's error", err)
	}
	if _, perr := eventid.Parse(res.EventID); perr != nil {
		t.Fatalf("Send's ctx ended: Result %+v carries no event ID (%v): the message may still be delivered", res, perr)
	}
	once.Do(func() { close(hold) })
	if got := readAll(t, c, "t", 1); eventid.FromRecord(got[0]) != res.EventID {
		t.Fatalf("delivered with event ID %q; Send reported %q", eventid.FromRecord(got[0]), res.EventID)
	}
}

// TestCancelledSendFailsNoOther: a message whose caller's ctx ends once it
// is buffered is still delivered, and so are the other sessions' messages
// buffered with it for its partition. franz-go fails every record buffered
// for a partition when the first one's context has ended: before the fix
// one caller's cancelled request failed the others' messages.
func TestCancelledSendFailsNoOther(t *testing.T) {
	c := cluster(t, 1, "t")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "t", Linger: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	p.SendAsync(ctx, "a", []byte("a|0"), func(_ Result, err error) { errs <- err })
	p.SendAsync(context.Background(), "b", []byte("b|0"), func(_ Result, err error) { errs <- err })
	cancel() // both wait in the partition's batch (Linger)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a send failed after a caller's ctx ended with its message buffered: %v", err)
		}
	}
	if got := readAll(t, c, "t", 2); len(got) != 2 {
		t.Fatalf("%d messages delivered, want 2", len(got))
	}
}
