package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	hold, held := holdProduce(t, c)
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
	hold()
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

// TestEndedCtxFailsNoOther: a SendAsync whose ctx has ended already fails
// its own message at once, unbuffered, and no other: franz-go buffers
// without looking at the context, and a record buffered with an ended
// context first in its batch failed the batch (found by review).
func TestEndedCtxFailsNoOther(t *testing.T) {
	c := cluster(t, 1, "t")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "t", Linger: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := make(chan error, 2)
	p.SendAsync(ctx, "a", []byte("a|0"), func(_ Result, err error) { errs <- err })
	p.SendAsync(context.Background(), "b", []byte("b|0"), func(_ Result, err error) { errs <- err })
	if ea, eb := <-errs, <-errs; !errors.Is(ea, context.Canceled) || eb != nil {
		t.Fatalf("a: %v; b: %v; want a's own ctx error, b delivered", ea, eb)
	}
	if got := readAll(t, c, "t", 1); string(got[0].Value) != "b|0" {
		t.Fatalf("delivered %q, want b|0", got[0].Value)
	}
}

// TestCtxEndsWaitForRoom: with the client's buffer full (its one record
// held at the broker), SendAsync waits for room, and its ctx ending ends
// that wait: its message fails alone, the one buffered before it is
// delivered once the broker answers.
func TestCtxEndsWaitForRoom(t *testing.T) {
	c := cluster(t, 1, "t")
	hold, held := holdProduce(t, c)
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "t", ClientOptions: []kgo.Opt{kgo.MaxBufferedRecords(1)}})
	first := make(chan error, 1)
	p.SendAsync(context.Background(), "a", []byte("a|0"), func(_ Result, err error) { first <- err })
	<-held // a is at the broker, still buffered: the buffer is full
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel) // SendAsync blocks below: nothing else can signal it
	second := make(chan error, 1)
	p.SendAsync(ctx, "b", []byte("b|0"), func(_ Result, err error) { second <- err })
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the send waiting for room: %v; want its ctx's end", err)
	}
	hold()
	if err := <-first; err != nil {
		t.Fatalf("the buffered message failed: %v", err)
	}
}

// holdProduce has c hold every produce request until hold is called (or
// the test ends, before c closes); held receives once the first is held.
func holdProduce(t *testing.T, c *kfake.Cluster) (hold func(), held <-chan struct{}) {
	release := make(chan struct{})
	var once sync.Once
	var asleep sync.WaitGroup
	hold = func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { hold(); asleep.Wait() }) // before the cluster closes (kfake: consumer/kfake_sleep_test.go)
	ch := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asleep.Add(1)
		defer asleep.Done()
		select {
		case ch <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return hold, ch
}

// TestSendFromDoneFullBuffer: a resend from done with a bounded ctx while
// the buffer is full ends with its ctx instead of waiting on the promise
// it runs in (found by review: a version that counted the buffer itself
// deadlocked here).
func TestSendFromDoneFullBuffer(t *testing.T) {
	c := cluster(t, 1, "t")
	p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "t", ClientOptions: []kgo.Opt{kgo.MaxBufferedRecords(1)}})
	errB := make(chan error, 1)
	p.SendAsync(context.Background(), "a", []byte("a|0"), func(Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		p.SendAsync(ctx, "b", []byte("b|0"), func(_ Result, err error) { errB <- err })
	})
	select {
	case err := <-errB:
		t.Logf("b: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("a resend from done with a 200 ms ctx: no result (deadlocked)")
	}
}
