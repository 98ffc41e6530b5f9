package lanestest

import (
	"context"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
)

// Handler wraps h so that every call is recorded in l, as member's. The
// message's session and seq come from its event ID (recorded by Acked or
// Send); a final call is one that succeeded or failed with
// consumer.Permanent.
func (l *Ledger) Handler(member string, h consumer.Handler) consumer.Handler {
	return Record(member, l.RecordCall, h)
}

// Middleware is Handler as a consumer.Middleware, for a consumer built
// elsewhere (a service's own constructor): add l.Middleware(member) to the
// service's Config.Middleware in the test. Put it inside any
// deduplication middleware (after it in the list): the ledger must see the
// calls that reached the handler, not the duplicates dedup skipped.
func (l *Ledger) Middleware(member string) consumer.Middleware {
	return func(h consumer.Handler) consumer.Handler { return l.Handler(member, h) }
}

// Record wraps h so that every call is passed to record when it returns,
// before the consumer sees its outcome: a Ledger's RecordCall, or a writer
// that appends calls to a file (a consumer in a child process). Seq is -1:
// the ledger finds the message by its event ID.
func Record(member string, record func(Call), h consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) (err error) {
		c := Call{Member: member, Session: m.SessionID, Seq: -1, EventID: m.EventID,
			Topic: m.Record.Topic, Partition: m.Record.Partition, Offset: m.Record.Offset, Attempt: m.Attempt, Start: time.Now()}
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
				c.End = time.Now()
				record(c)
				panic(p)
			}
			c.End = time.Now()
			c.OK = err == nil
			c.Final = err == nil || consumer.IsPermanent(err)
			record(c)
		}()
		return h.Handle(ctx, m)
	})
}

// Send sends value for session through p as the session's seq-th message,
// waits for the broker's acknowledgement and records it. It returns the
// producer's error.
//
// The event ID is derived from session and seq (producer.WithSequence)
// unless opts set one: opts are the producer's send options, applied after
// it, such as producer.WithTopic for a topic other than the producer's
// Config.Topic, producer.WithHeader, or producer.WithEventID. The ledger
// records the event ID the producer stamped, whichever it is. A session
// sent to several topics: see the package documentation.
func (l *Ledger) Send(ctx context.Context, p *producer.Producer, session string, seq int, value []byte, opts ...producer.SendOption) error {
	res, err := p.Send(ctx, session, value, sendOpts(seq, opts)...)
	if err != nil {
		return err
	}
	l.Acked(session, seq, res.EventID)
	return nil
}

// SendAsync is Send without waiting: the acknowledgement is recorded when
// it arrives, and done (if not nil) gets the producer's error. Flush the
// producer to wait for every acknowledgement.
func (l *Ledger) SendAsync(ctx context.Context, p *producer.Producer, session string, seq int, value []byte, done func(error), opts ...producer.SendOption) {
	p.SendAsync(ctx, session, value, func(res producer.Result, err error) {
		if err == nil {
			l.Acked(session, seq, res.EventID)
		}
		if done != nil {
			done(err)
		}
	}, sendOpts(seq, opts)...)
}

// sendOpts is the seq's WithSequence followed by the caller's options.
func sendOpts(seq int, opts []producer.SendOption) []producer.SendOption {
	return append([]producer.SendOption{producer.WithSequence(uint64(seq))}, opts...)
}
