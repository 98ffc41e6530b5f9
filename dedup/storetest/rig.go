package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	topic      = "events"
	dlq        = "events-dlq"
	partitions = 4
)

// msg is one sent message, as the ledger knows it.
type msg struct {
	session string
	seq     int
	id      string
}

// rig is one scenario: an embedded broker, a group of its own, the store,
// the messages sent and the effects applied, per event ID.
type rig struct {
	t     *testing.T
	b     *lanestest.Broker
	group string
	store dedup.Store
	sent  []msg

	mu      sync.Mutex
	effects map[string]int
}

func newRig(t *testing.T, s dedup.Store) *rig {
	b, err := lanestest.NewBroker(partitions, topic, dlq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &rig{t: t, b: b, group: unique(t), store: s, effects: map[string]int{}}
}

// send sends per messages for each of sessions sessions, seqs from first.
func (r *rig) send(sessions, first, per int) {
	r.t.Helper()
	p, err := producer.New(producer.Config{Brokers: r.b.Addrs(), Topic: topic})
	if err != nil {
		r.t.Fatal(err)
	}
	defer p.Close()
	ctx := ctxFor(r.t, time.Minute)
	for seq := first; seq < first+per; seq++ {
		for s := range sessions {
			session := fmt.Sprintf("session-%02d", s)
			res, err := p.Send(ctx, session, fmt.Appendf(nil, "%s #%d", session, seq), producer.WithSequence(uint64(seq)))
			if err != nil {
				r.t.Fatal(err)
			}
			r.sent = append(r.sent, msg{session, seq, res.EventID})
		}
	}
}

// handler applies the effect of a message: one more application of its
// event.
func (r *rig) handler() consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.effects[m.EventID]++
		return nil
	})
}

// ledger returns a ledger that knows every message sent so far.
func (r *rig) ledger() *lanestest.Ledger {
	l := lanestest.NewLedger()
	for _, m := range r.sent {
		l.Acked(m.session, m.seq, m.id)
	}
	return l
}

func (r *rig) dedup() *dedup.Dedup {
	d, err := dedup.New(dedup.Config{Store: r.store, Group: r.group, WaitInterval: 20 * time.Millisecond})
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// consumer returns a member of the rig's group: the ledger records every
// delivery (outermost), then the dedup middleware, then the effect.
func (r *rig) consumer(member string, l *lanestest.Ledger, d *dedup.Dedup, small bool) *consumer.Consumer {
	cfg := consumer.Config{Brokers: r.b.Addrs(), Group: r.group, Topics: []string{topic}, DeadLetterTopic: dlq,
		CommitInterval: 50 * time.Millisecond,
		Retry:          consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 1000},
		Middleware: []consumer.Middleware{
			func(h consumer.Handler) consumer.Handler { return l.Handler(member, h) },
			d.Middleware,
		},
	}
	if small { // little buffered, so that a member leaving leaves work to the others
		cfg.MaxBufferedRecords, cfg.MaxPollRecords = 8, 4
	}
	c, err := consumer.New(cfg, r.handler())
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// run runs one member until every message sent is accounted for.
func (r *rig) run(member string, d *dedup.Dedup) *lanestest.Ledger {
	r.t.Helper()
	l := r.ledger()
	if err := lanestest.Run(ctxFor(r.t, 2*time.Minute), r.consumer(member, l, d, false), l,
		lanestest.RunOptions{Want: len(r.sent), Broker: r.b, DeadLetterTopic: dlq}); err != nil {
		r.t.Fatal(err)
	}
	return l
}

// rewind commits offset 0 for every partition: what the group's offsets
// are after a member crashed before its first commit. Everything already
// handled is delivered again.
func (r *rig) rewind() {
	r.t.Helper()
	cl, err := r.b.Client()
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	var os kadm.Offsets
	for p := range int32(partitions) {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctxFor(r.t, 30*time.Second), r.group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.t.Fatalf("rewind the group's offsets: %v", err)
	}
}

// once checks that every message sent had its effect applied exactly once.
func (r *rig) once() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.sent {
		if n := r.effects[m.id]; n != 1 {
			r.t.Errorf("%s #%d (%s): effect applied %d times, want once", m.session, m.seq, m.id, n)
		}
	}
}

// noLoss checks the ledger: nothing lost or dead-lettered.
func noLoss(t *testing.T, l *lanestest.Ledger) {
	t.Helper()
	rep := l.Report()
	if rep.Lost > 0 || rep.DeadLettered > 0 {
		t.Fatalf("lost %d, dead-lettered %d: %v", rep.Lost, rep.DeadLettered, rep.Details)
	}
}
